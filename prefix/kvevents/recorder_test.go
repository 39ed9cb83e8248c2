package kvevents_test

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// A Publisher records events on the index's goroutine and encodes them later: the bytes
// must be the Batcher's, event for event.
func TestRecordingEncodesAsTheBatcher(t *testing.T) {
	emit := func(o prefix.Observer) { observeGolden(t, o) }
	got := kvevents.RecordThenEncode(emit, goldenTS, kvevents.WithLoRAIDs(loraIDs))
	require.Equal(t, goldenBatch, hex.EncodeToString(got))

	rapid.Check(t, func(rt *rapid.T) {
		type ev struct {
			kind   int
			n      int
			bs     int
			parent bool
			mm     bool
			ns     prefix.Namespace
			seed   int32
		}
		evs := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) ev {
			return ev{
				kind: rapid.IntRange(0, 2).Draw(rt, "kind"), n: rapid.IntRange(1, 5).Draw(rt, "n"),
				bs: rapid.IntRange(1, 4).Draw(rt, "bs"), parent: rapid.Bool().Draw(rt, "parent"),
				mm:   rapid.Bool().Draw(rt, "mm"),
				ns:   prefix.Namespace{LoRA: rapid.SampledFrom([]string{"", "l"}).Draw(rt, "lora"), Salt: rapid.SampledFrom([]string{"", "s"}).Draw(rt, "salt")},
				seed: rapid.Int32().Draw(rt, "seed"),
			}
		}), 0, 6).Draw(rt, "events")
		emit := func(o prefix.Observer) {
			for _, e := range evs {
				hs := make([]byte, e.n*32)
				for i := range hs {
					hs[i] = byte(int32(i) ^ e.seed)
				}
				switch e.kind {
				case 0:
					s := &prefix.BlockStored{Hashes: hs, HashSize: 32, Blocks: make([]blocks.ID, e.n), BlockSize: e.bs, Namespace: e.ns}
					for i := range e.n * e.bs {
						s.Tokens = append(s.Tokens, e.seed+int32(i)*977)
					}
					if e.parent {
						s.Parent = hs[:32]
					}
					if e.mm {
						for i := range e.n {
							s.MM = append(s.MM, []string{"m", "x"}[:i%3%2+i%2])
						}
					}
					o.BlockStored(s)
				case 1:
					o.BlockRemoved(&prefix.BlockRemoved{Hashes: hs, HashSize: 32, Blocks: make([]blocks.ID, e.n)})
				default:
					o.AllBlocksCleared()
				}
			}
		}
		direct := newBatcher(rt)
		emit(direct)
		require.Equal(rt, hex.EncodeToString(direct.AppendBatch(nil, 3)), hex.EncodeToString(kvevents.RecordThenEncode(emit, 3)))
	})
}

func TestRecordingDoesNotAllocate(t *testing.T) {
	if invariant.Enabled {
		t.Skip("allocation counts are meaningless with invariant checks on")
	}
	stored := &prefix.BlockStored{
		Hashes: make([]byte, 8*32), HashSize: 32, Parent: make([]byte, 32), Blocks: make([]blocks.ID, 8),
		Tokens: seqTokens(100000, 100128), BlockSize: 16, Namespace: prefix.Namespace{LoRA: "l", Salt: "s"},
		MM: [][]string{{"a"}, {"a", "b"}, nil, nil, nil, nil, nil, {"c"}},
	}
	removed := &prefix.BlockRemoved{Hashes: make([]byte, 4*32), HashSize: 32, Blocks: make([]blocks.ID, 4)}
	require.Zero(t, kvevents.RecordingAllocs(func(o prefix.Observer) {
		for range 10 {
			o.BlockStored(stored)
			o.BlockRemoved(removed)
		}
		o.AllBlocksCleared()
	}))
}
