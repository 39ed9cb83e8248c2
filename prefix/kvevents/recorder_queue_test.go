package kvevents_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/kvevents"
)

// gateSink holds the sender goroutine until the gate opens, then records what it got.
// held (if not nil) is signalled once the sender is held: by then the Recorder has
// recycled the batch's recording (it does before Send), so exactly the configured queue's
// slots are left.
type gateSink struct {
	gate chan struct{}
	held chan struct{}
	seqs chan uint64
	fail bool
}

func (s *gateSink) Send(seq uint64, payload []byte) error {
	select {
	case s.held <- struct{}{}:
	default:
	}
	<-s.gate
	s.seqs <- seq
	if s.fail {
		return errors.New("refused")
	}
	return nil
}

// With every queue slot taken, Flush drops the batch at once, counts it, and still uses
// its sequence number, so that subscribers see the gap.
func TestRecorderDropsInsteadOfWaiting(t *testing.T) {
	sink := &gateSink{gate: make(chan struct{}), held: make(chan struct{}, 1), seqs: make(chan uint64, 8)}
	r, err := kvevents.NewRecorder(sink, kvevents.WithQueue(2))
	require.NoError(t, err)
	r.AllBlocksCleared()
	r.Flush() // 0: the sender holds it
	<-sink.held
	for range 3 {
		r.AllBlocksCleared()
		r.AllBlocksCleared()
		r.Flush() // 1 and 2 fill the queue's two slots: 3 finds none
	}
	st := r.Stats()
	require.EqualValues(t, 4, st.Sealed)
	require.EqualValues(t, 1, st.DroppedBatches)
	require.EqualValues(t, 2, st.DroppedEvents)
	last, ok := r.LastSeq()
	require.True(t, ok)
	require.EqualValues(t, 3, last, "the dropped batch used sequence number 3")
	close(sink.gate)
	require.NoError(t, r.Close())
	require.EqualValues(t, 3, r.Stats().Published)
	for _, want := range []uint64{0, 1, 2} {
		require.Equal(t, want, <-sink.seqs)
	}
}

// Every sealed batch ends up counted once: published, dropped, or refused by the sink.
func TestRecorderCountsSinkErrors(t *testing.T) {
	sink := &gateSink{gate: make(chan struct{}), seqs: make(chan uint64, 8), fail: true}
	close(sink.gate)
	r, err := kvevents.NewRecorder(sink)
	require.NoError(t, err)
	r.AllBlocksCleared()
	r.Flush()
	require.NoError(t, r.Close())
	st := r.Stats()
	require.EqualValues(t, 1, st.Sealed)
	require.EqualValues(t, 1, st.SendErrors)
	require.Zero(t, st.Published)
	r.AllBlocksCleared() // after Close: dropped and counted
	require.EqualValues(t, 1, r.Stats().DroppedEvents)
	_, err = kvevents.NewRecorder(nil)
	require.ErrorIs(t, err, kvevents.ErrNilSink)
}

func TestRecorderRefusesHugeQueues(t *testing.T) {
	sink := &gateSink{gate: make(chan struct{}), seqs: make(chan uint64, 1)}
	for _, o := range []kvevents.Option{kvevents.WithQueue(1 << 40), kvevents.WithMaxBatchEvents(kvevents.MaxQueue + 1)} {
		r, err := kvevents.NewRecorder(sink, o)
		require.ErrorIs(t, err, kvevents.ErrInvalidArgument)
		require.Nil(t, r)
	}
}
