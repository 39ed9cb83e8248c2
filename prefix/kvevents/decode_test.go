package kvevents_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"

	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

func TestDecodeGoldenBatch(t *testing.T) {
	b, err := kvevents.DecodeBatch(unhex(t, goldenBatch))
	require.NoError(t, err)
	require.Equal(t, goldenTS, b.Timestamp)
	require.True(t, b.HasDataParallelRank)
	require.Zero(t, b.DataParallelRank)
	require.Len(t, b.Events, 4)

	s := b.Events[0]
	require.Equal(t, kvevents.KindBlockStored, s.Kind)
	require.Len(t, s.Hashes, 2)
	require.Equal(t, plain1, hex.EncodeToString(s.Hashes[1].Bytes))
	require.False(t, s.HasParent)
	require.Equal(t, seqTokens(0, 32), s.Tokens)
	require.Equal(t, 16, s.BlockSize)
	require.False(t, s.HasLoRAID)
	require.True(t, s.HasMedium)
	require.Equal(t, "GPU", s.Medium)
	require.False(t, s.HasLoRAName)
	require.Equal(t, [][]any{nil, nil}, s.ExtraKeys)

	l := b.Events[1]
	require.True(t, l.HasLoRAID)
	require.EqualValues(t, 7, l.LoRAID)
	require.Equal(t, "my-lora", l.LoRAName)
	require.Equal(t, []any{"my-lora", "img-a", "tenant-a"}, l.ExtraKeys[0])

	require.Equal(t, kvevents.KindBlockRemoved, b.Events[2].Kind)
	require.Equal(t, plain1, hex.EncodeToString(b.Events[2].Hashes[0].Bytes))
	require.Equal(t, kvevents.KindAllBlocksCleared, b.Events[3].Kind)

	ib, err := kvevents.DecodeBatch(unhex(t, goldenIntBatch))
	require.NoError(t, err)
	for i, e := range ib.Events {
		for j, h := range e.Hashes {
			require.True(t, h.IsInt)
			require.Equal(t, b.Events[i].Hashes[j].Uint64(), h.Uint64(), "both forms key the same")
		}
	}
}

// Later vLLM writes each event as a map keyed by field name, the tag under "type", in any
// order, possibly with fields this package does not know.
func TestDecodeMapEvents(t *testing.T) {
	payload, err := msgpack.Marshal([]any{
		2.5,
		[]any{
			map[string]any{
				"block_hashes": []any{unhex(t, plain0)}, "parent_block_hash": nil,
				"token_ids": seqTokens(0, 16), "block_size": 16, "lora_id": nil,
				"medium": "GPU", "lora_name": nil, "extra_keys": []any{nil},
				"group_idx": 0, "type": "BlockStored",
			},
			map[string]any{"type": "BlockRemoved", "block_hashes": []any{uint64(12345)}, "medium": "GPU"},
			map[string]any{"type": "AllBlocksCleared"},
		},
		nil,
	})
	require.NoError(t, err)
	b, err := kvevents.DecodeBatch(payload)
	require.NoError(t, err)
	require.False(t, b.HasDataParallelRank, "None")
	require.Len(t, b.Events, 3)
	require.Equal(t, kvevents.KindBlockStored, b.Events[0].Kind)
	require.Equal(t, seqTokens(0, 16), b.Events[0].Tokens)
	require.Equal(t, plain0, hex.EncodeToString(b.Events[0].Hashes[0].Bytes))
	require.Equal(t, uint64(12345), b.Events[1].Hashes[0].Uint64())
	require.Equal(t, kvevents.KindAllBlocksCleared, b.Events[2].Kind)
}

func TestDecodeToleratesTrailingFields(t *testing.T) {
	// vLLM added group_idx and kv_cache_spec fields after extra_keys, and may add more.
	payload, err := msgpack.Marshal([]any{1.0, []any{
		[]any{"BlockStored", []any{uint64(1)}, uint64(9), []any{1, 2}, 2, nil, "GPU", nil, nil, 0, "full", nil},
		[]any{"BlockRemoved", []any{uint64(1)}, "GPU", 0},
	}, 0, "future"})
	require.NoError(t, err)
	b, err := kvevents.DecodeBatch(payload)
	require.NoError(t, err)
	require.True(t, b.Events[0].HasParent)
	require.Equal(t, uint64(9), b.Events[0].Parent.Uint64())
	require.Nil(t, b.Events[0].ExtraKeys)
}

func TestDecodeRejectsMalformed(t *testing.T) {
	for name, v := range map[string]any{
		"not an array":        "hello",
		"one element":         []any{1.0},
		"events not an array": []any{1.0, 5},
		"unknown tag":         []any{1.0, []any{[]any{"BlockMoved"}}},
		"event without tag":   []any{1.0, []any{[]any{}}},
		"stored too short":    []any{1.0, []any{[]any{"BlockStored", []any{}, nil}}},
		"removed no hashes":   []any{1.0, []any{[]any{"BlockRemoved"}}},
		"token not integer":   []any{1.0, []any{[]any{"BlockStored", []any{}, nil, []any{"x"}, 1}}},
		"token out of range":  []any{1.0, []any{[]any{"BlockStored", []any{}, nil, []any{int64(1) << 40}, 1}}},
		"hash is None":        []any{1.0, []any{[]any{"BlockRemoved", []any{nil}}}},
		"map without type":    []any{1.0, []any{map[string]any{"block_hashes": []any{}}}},
		"negative block size": []any{1.0, []any{[]any{"BlockStored", []any{}, nil, []any{}, -1}}},
	} {
		t.Run(name, func(t *testing.T) {
			payload, err := msgpack.Marshal(v)
			require.NoError(t, err)
			_, err = kvevents.DecodeBatch(payload)
			require.ErrorIs(t, err, kvevents.ErrMalformed)
		})
	}
	_, err := kvevents.DecodeBatch(append(unhex(t, goldenBatch), 0))
	require.ErrorIs(t, err, kvevents.ErrMalformed, "trailing bytes")
	huge := unhex(t, "92 cb 0000000000000000 dd ffffffff") // claims 4G events in 0 bytes
	_, err = kvevents.DecodeBatch(huge)
	require.ErrorIs(t, err, kvevents.ErrMalformed)
}

func TestDecoderReuseDoesNotAllocate(t *testing.T) {
	if invariant.Enabled {
		t.Skip("allocation counts are meaningless with invariant checks on")
	}
	b := newBatcher(t, kvevents.WithoutExtraKeys())
	observeGolden(t, b)
	payload := b.AppendBatch(nil, 1)
	var d kvevents.Decoder
	var batch kvevents.Batch
	require.NoError(t, d.Decode(payload, &batch))
	allocs := testing.AllocsPerRun(100, func() {
		if err := d.Decode(payload, &batch); err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs)
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(unhex(f, goldenBatch))
	f.Add(unhex(f, goldenIntBatch))
	f.Add(unhex(f, "92cb000000000000000090"))
	m, _ := msgpack.Marshal([]any{1.0, []any{map[string]any{"type": "BlockRemoved", "block_hashes": []any{1}}}})
	f.Add(m)
	// vLLM's hybrid allocator's forms: group_idx after extra_keys and after medium.
	g, _ := msgpack.Marshal([]any{1.0, []any{
		[]any{"BlockStored", []any{uint64(1)}, nil, []any{1, 2}, 2, nil, "GPU", nil, nil, 1, "sliding_window", 64},
		[]any{"BlockRemoved", []any{uint64(1)}, "GPU", 1},
	}, 0})
	f.Add(g)
	mb, _ := msgpack.Marshal(map[string]any{"ts": 1.0, "events": []any{map[string]any{"type": "AllBlocksCleared"}}, "data_parallel_rank": 1})
	f.Add(mb)
	// extra_keys in the (identifier, offset) form, offsets at int64's and uint64's edges,
	// an unknown medium, group_idx at MaxGroup and beyond it.
	pk, _ := msgpack.Marshal([]any{1.0, []any{
		[]any{"BlockStored", []any{uint64(1)}, nil, []any{1, 2}, 2, nil, "TAPE", "l", []any{[]any{"l", []any{"img", int64(math.MinInt64)}, []any{"v", uint64(math.MaxUint64)}, "s"}}, kvevents.MaxGroup},
		[]any{"BlockRemoved", []any{uint64(1)}, "DISK", kvevents.MaxGroup + 1},
	}, 0})
	f.Add(pk)
	mk, _ := msgpack.Marshal(map[string]any{"ts": 1.0, "events": []any{map[string]any{
		"type": "BlockStored", "block_hashes": []any{1}, "token_ids": []any{1}, "block_size": 1, "medium": "CPU",
		"group_idx": 3, "extra_keys": []any{[]any{[]any{"img", -5}}},
	}}})
	f.Add(mk)
	// lora_name at MaxLoRANameBytes and one byte past it.
	for _, n := range []int{kvevents.MaxLoRANameBytes, kvevents.MaxLoRANameBytes + 1} {
		ln, _ := msgpack.Marshal([]any{1.0, []any{
			[]any{"BlockStored", []any{uint64(1)}, nil, []any{1}, 1, nil, "GPU", strings.Repeat("l", n)},
		}, 0})
		f.Add(ln)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var d kvevents.Decoder
		var b kvevents.Batch
		err := d.Decode(payload, &b)
		if err != nil {
			if !errors.Is(err, kvevents.ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		for _, e := range b.Events {
			if len(e.LoRAName) > kvevents.MaxLoRANameBytes || len(e.Medium) > kvevents.MaxMediumBytes || e.Group < 0 || e.Group > kvevents.MaxGroup {
				t.Fatalf("decoded an event past the bounds: lora_name %d bytes, medium %d, group %d", len(e.LoRAName), len(e.Medium), e.Group)
			}
		}
		// What we decode is well-formed msgpack to a generic decoder too, with the same
		// number of events. The generic decoder only walks the structure (Skip), so that
		// values it would refuse to build in Go (maps as map keys, extension types it has
		// no decoder for) are not held against ours, which skips unknown fields.
		gd := msgpack.NewDecoder(bytes.NewReader(payload))
		if payload[0]&0xf0 == 0x80 || payload[0] == 0xde || payload[0] == 0xdf { // the map form
			n, err := gd.DecodeMapLen()
			if err != nil {
				t.Fatalf("decoded by us but the generic decoder reads no batch map: %v", err)
			}
			for range n {
				key, err := gd.DecodeString()
				if err != nil {
					t.Fatalf("decoded by us but the generic decoder reads no key: %v", err)
				}
				if key != "events" {
					if err := gd.Skip(); err != nil {
						t.Fatalf("decoded by us but not well-formed to the generic decoder: %v", err)
					}
					continue
				}
				events, err := gd.DecodeArrayLen()
				if err != nil || events != len(b.Events) {
					t.Fatalf("we decoded %d events, the generic decoder reads %d (%v)", len(b.Events), events, err)
				}
				for range events {
					if err := gd.Skip(); err != nil {
						t.Fatalf("decoded by us but not well-formed to the generic decoder: %v", err)
					}
				}
			}
		} else {
			n, err := gd.DecodeArrayLen()
			if err != nil || n < 2 {
				t.Fatalf("decoded by us but the generic decoder reads no batch: %d, %v", n, err)
			}
			if err := gd.Skip(); err != nil {
				t.Fatalf("decoded by us but the generic decoder cannot skip the timestamp: %v", err)
			}
			events, err := gd.DecodeArrayLen()
			if err != nil || events != len(b.Events) {
				t.Fatalf("we decoded %d events, the generic decoder reads %d (%v)", len(b.Events), events, err)
			}
			for range events + n - 2 {
				if err := gd.Skip(); err != nil {
					t.Fatalf("decoded by us but not well-formed to the generic decoder: %v", err)
				}
			}
		}
		for _, e := range b.Events {
			if e.Kind < kvevents.KindBlockStored || e.Kind > kvevents.KindAllBlocksCleared {
				t.Fatalf("kind %v", e.Kind)
			}
		}
	})
}

// Tokens in every integer form the library writes decode to themselves (the decoder reads
// the common forms itself and leaves the rest to the library).
func TestDecodeTokensInEveryForm(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		toks := rapid.SliceOf(rapid.OneOf(rapid.Int32Range(0, 300), rapid.Int32Range(0, 1<<20), rapid.Int32())).Draw(rt, "toks")
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		require.NoError(rt, enc.EncodeArrayLen(2))
		require.NoError(rt, enc.EncodeFloat64(1))
		require.NoError(rt, enc.EncodeArrayLen(1))
		require.NoError(rt, enc.EncodeArrayLen(5))
		require.NoError(rt, enc.EncodeString("BlockStored"))
		require.NoError(rt, enc.EncodeArrayLen(0))
		require.NoError(rt, enc.EncodeNil())
		require.NoError(rt, enc.EncodeArrayLen(len(toks)))
		for _, v := range toks {
			// Signed forms too (int8..int64), which msgspec never writes for these values
			// but another encoder might.
			if rapid.Bool().Draw(rt, "signed") {
				require.NoError(rt, enc.EncodeInt64(int64(v)))
			} else {
				require.NoError(rt, enc.EncodeInt(int64(v)))
			}
		}
		require.NoError(rt, enc.EncodeInt(16))
		b, err := kvevents.DecodeBatch(buf.Bytes())
		require.NoError(rt, err)
		if len(toks) == 0 {
			require.Empty(rt, b.Events[0].Tokens)
		} else {
			require.Equal(rt, toks, b.Events[0].Tokens)
		}
		require.Equal(rt, 16, b.Events[0].BlockSize, "the field after the tokens is read in place")
	})
}
