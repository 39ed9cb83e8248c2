package zmq_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/kvpage/kvpage/prefix/kvevents/zmq"
)

// The replay ring against a model: every pushed batch, of which it keeps the last ones.
func TestReplayRingStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		capacity := rapid.IntRange(1, 8).Draw(rt, "capacity")
		r := zmq.NewReplayRing(capacity)
		var model []uint64
		next := uint64(0)
		rt.Repeat(map[string]func(*rapid.T){
			"push": func(rt *rapid.T) {
				next += uint64(rapid.IntRange(1, 3).Draw(rt, "step")) // gaps: dropped batches
				r.Push(next, []byte{byte(next)})
				model = append(model, next)
			},
			"from": func(rt *rapid.T) {
				seq := uint64(rapid.IntRange(0, int(next)+2).Draw(rt, "seq"))
				var want []uint64
				for _, s := range model[max(0, len(model)-capacity):] {
					if s >= seq {
						want = append(want, s)
					}
				}
				require.Equal(rt, want, r.From(seq))
			},
			"": func(rt *rapid.T) { require.NoError(rt, r.Check()) },
		})
	})
}
