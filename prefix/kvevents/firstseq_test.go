package kvevents_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/kvevents"
)

// WithFirstSeq numbers a Recorder's batches from n (a replacement publisher continuing
// its predecessor's numbering); 2^64-1, after which no batch could follow, is refused.
func TestRecorderWithFirstSeq(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []kvevents.Option
		first uint64
	}{
		{"default", nil, 0},
		{"from 0", []kvevents.Option{kvevents.WithFirstSeq(0)}, 0},
		{"from 1000", []kvevents.Option{kvevents.WithFirstSeq(1000)}, 1000},
		{"from 2^64-2", []kvevents.Option{kvevents.WithFirstSeq(math.MaxUint64 - 1)}, math.MaxUint64 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := chanSink(make(chan uint64, 1))
			r, err := kvevents.NewRecorder(sink, tc.opts...)
			require.NoError(t, err)
			defer r.Close()
			_, ok := r.LastSeq()
			require.False(t, ok, "nothing sealed yet")
			r.AllBlocksCleared()
			seq, sealed := r.Flush()
			require.True(t, sealed)
			require.Equal(t, tc.first, seq)
			last, ok := r.LastSeq()
			require.True(t, ok)
			require.Equal(t, tc.first, last)
			require.Equal(t, tc.first, <-sink)
		})
	}
	_, err := kvevents.NewRecorder(chanSink(make(chan uint64)), kvevents.WithFirstSeq(math.MaxUint64))
	require.ErrorIs(t, err, kvevents.ErrInvalidArgument)
}
