package kvevents

import (
	"testing"

	"github.com/kvpage/kvpage/prefix"
)

// AppendMsgpackInt is appendMsgpackInt, for the test that compares it with the library.
func AppendMsgpackInt(dst []byte, v int32) []byte { return appendMsgpackInt(dst, v) }

// AppendMsgpackTokens is appendMsgpackTokens.
func AppendMsgpackTokens(dst []byte, toks []int32) []byte { return appendMsgpackTokens(dst, toks) }

// RecordThenEncode records the events that emit sends to its observer, as a Publisher
// does on the index's goroutine, and encodes the recording as the sender goroutine does.
func RecordThenEncode(emit func(prefix.Observer), ts float64, opts ...Option) []byte {
	r := new(recording)
	emit(recorderObserver{r})
	b, err := NewBatcher(opts...)
	if err != nil {
		panic(err)
	}
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

// DecoderHeldBytes is the payload bytes a Decoder still refers to.
func DecoderHeldBytes(d *Decoder) int { return len(d.payload) + int(d.r.Size()) }
