package kvevents

import (
	"testing"

	"github.com/kvpage/kvpage/prefix"
)

// WithSendHook makes the sender goroutine call hook before each batch, so that a test can
// hold it and fill the queue deterministically.
func WithSendHook(hook func()) Option { return func(c *config) { c.sendHook = hook } }

// ReplayRing exposes the replay buffer to the state-machine test.
type ReplayRing struct{ r *replayRing }

// NewReplayRing returns an empty ring of the given capacity.
func NewReplayRing(capacity int) ReplayRing { return ReplayRing{newReplayRing(capacity)} }

// Push adds a batch.
func (r ReplayRing) Push(seq uint64, payload []byte) { r.r.push(seq, payload) }

// From returns the sequence numbers of the entries from seq on.
func (r ReplayRing) From(seq uint64) []uint64 {
	var out []uint64
	for _, e := range r.r.from(nil, seq) {
		out = append(out, e.seq)
	}
	return out
}

// Check verifies the ring's invariants.
func (r ReplayRing) Check() error {
	r.r.mu.Lock()
	defer r.r.mu.Unlock()
	return r.r.checkInvariants()
}

// AppendMsgpackInt is appendMsgpackInt, for the test that compares it with the library.
func AppendMsgpackInt(dst []byte, v int32) []byte { return appendMsgpackInt(dst, v) }

// AppendMsgpackTokens is appendMsgpackTokens.
func AppendMsgpackTokens(dst []byte, toks []int32) []byte { return appendMsgpackTokens(dst, toks) }

// AppendCBORTokens and AppendCBORInt are the hasher's token encoders.
func AppendCBORTokens(dst []byte, toks []int32) []byte { return appendCBORTokens(dst, toks) }

// AppendCBORInt is appendCBORInt.
func AppendCBORInt(dst []byte, v int64) []byte { return appendCBORInt(dst, v) }

// RecordThenEncode records the events that emit sends to its observer, as a Publisher
// does on the index's goroutine, and encodes the recording as the sender goroutine does.
func RecordThenEncode(emit func(prefix.Observer), ts float64, opts ...Option) []byte {
	r := new(recording)
	emit(recorderObserver{r})
	b := NewBatcher(opts...)
	var rp replayer
	rp.replay(r, b)
	return b.AppendBatch(nil, ts)
}

// RecordingAllocs reports the allocations of recording emit's events into a warm recording.
func RecordingAllocs(emit func(prefix.Observer)) float64 {
	r := new(recording)
	o := recorderObserver{r}
	emit(o)
	return testing.AllocsPerRun(50, func() {
		r.reset()
		emit(o)
	})
}

type recorderObserver struct{ r *recording }

func (o recorderObserver) BlockStored(e *prefix.BlockStored)   { o.r.blockStored(e) }
func (o recorderObserver) BlockRemoved(e *prefix.BlockRemoved) { o.r.blockRemoved(e) }
func (o recorderObserver) AllBlocksCleared()                   { o.r.allBlocksCleared() }
