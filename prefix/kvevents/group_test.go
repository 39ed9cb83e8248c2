package kvevents_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// vLLM's hybrid allocator writes group_idx after extra_keys on a BlockStored and after
// medium on a BlockRemoved (llm-d's vllm_adapter reads positions 9 and 3), 0 included;
// the map form names it "group_idx".
func TestDecodeGroup(t *testing.T) {
	payload, err := msgpack.Marshal([]any{1.0, []any{
		[]any{"BlockStored", []any{unhex(t, plain0)}, nil, seqTokens(0, 16), 16, nil, "GPU", nil, nil, 2, "sliding_window", 128},
		[]any{"BlockStored", []any{unhex(t, plain1)}, unhex(t, plain0), seqTokens(16, 32), 16, nil, "GPU", nil, []any{nil}, 0},
		[]any{"BlockRemoved", []any{unhex(t, plain0)}, "GPU", 2},
		[]any{"BlockRemoved", []any{unhex(t, plain1)}, "GPU", nil},
		map[string]any{"type": "BlockRemoved", "block_hashes": []any{uint64(5)}, "group_idx": 3},
		[]any{"BlockRemoved", []any{unhex(t, plain1)}, "GPU"},
	}, 0})
	require.NoError(t, err)
	b, err := kvevents.DecodeBatch(payload)
	require.NoError(t, err)
	type g struct {
		has   bool
		group int
	}
	var got []g
	for _, e := range b.Events {
		got = append(got, g{e.HasGroup, e.Group})
	}
	require.Equal(t, []g{{true, 2}, {true, 0}, {true, 2}, {false, 0}, {true, 3}, {false, 0}}, got)
	require.Equal(t, seqTokens(16, 32), b.Events[1].Tokens, "the fields before the group are unchanged")

	for name, group := range map[string]any{"negative": -1, "too large": kvevents.MaxGroup + 1, "a string": "0"} {
		t.Run(name, func(t *testing.T) {
			p, err := msgpack.Marshal([]any{1.0, []any{[]any{"BlockRemoved", []any{uint64(1)}, "GPU", group}}})
			require.NoError(t, err)
			_, err = kvevents.DecodeBatch(p)
			require.ErrorIs(t, err, kvevents.ErrMalformed)
		})
	}
}

// The golden payloads come from vLLM before the hybrid allocator: no group.
func TestDecodeGoldenHasNoGroup(t *testing.T) {
	b, err := kvevents.DecodeBatch(unhex(t, goldenBatch))
	require.NoError(t, err)
	for _, e := range b.Events {
		require.False(t, e.HasGroup)
	}
}

// WithGroup writes group_idx where vLLM does, and the rest of the event as without it.
func TestBatcherWithGroup(t *testing.T) {
	stored := &prefix.BlockStored{Hashes: unhex(t, plain0), HashSize: 32, Blocks: []blocks.ID{1}, Tokens: seqTokens(0, 16), BlockSize: 16}
	removed := &prefix.BlockRemoved{Hashes: unhex(t, plain0), HashSize: 32, Blocks: []blocks.ID{1}}
	for _, tc := range []struct {
		name  string
		opts  []kvevents.Option
		store []any // the BlockStored after its tag, hashes and tokens
	}{
		{"with extra keys", nil, []any{nil, "GPU", nil, []any{nil}, int8(1)}},
		{"without extra keys", []kvevents.Option{kvevents.WithoutExtraKeys()}, []any{nil, "GPU", nil, nil, int8(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bat := newBatcher(t, append(tc.opts, kvevents.WithGroup(1))...)
			bat.BlockStored(stored)
			bat.BlockRemoved(removed)
			payload := bat.AppendBatch(nil, 1)
			var raw []any
			require.NoError(t, msgpack.Unmarshal(payload, &raw))
			events := raw[1].([]any)
			s := events[0].([]any)
			require.Len(t, s, 10)
			require.Equal(t, tc.store, s[5:])
			r := events[1].([]any)
			require.Len(t, r, 4)
			require.Equal(t, []any{"GPU", int8(1)}, r[2:])

			b, err := kvevents.DecodeBatch(payload)
			require.NoError(t, err)
			for _, e := range b.Events {
				require.True(t, e.HasGroup)
				require.Equal(t, 1, e.Group)
			}

			// Group 0 is written too, as vLLM writes it.
			bat = newBatcher(t, append(tc.opts, kvevents.WithGroup(0))...)
			bat.BlockRemoved(removed)
			b, err = kvevents.DecodeBatch(bat.AppendBatch(nil, 1))
			require.NoError(t, err)
			require.True(t, b.Events[0].HasGroup)
			require.Zero(t, b.Events[0].Group)
		})
	}

	// Without WithGroup the events keep the form before it (the golden tests check its bytes).
	bat := newBatcher(t)
	bat.BlockRemoved(removed)
	var raw []any
	require.NoError(t, msgpack.Unmarshal(bat.AppendBatch(nil, 1), &raw))
	require.Len(t, raw[1].([]any)[0], 3)
}

// vLLM's EventBatch without array_like is a map: ts, events, data_parallel_rank (left out
// when None), in any order.
func TestDecodeMapBatch(t *testing.T) {
	payload, err := msgpack.Marshal(map[string]any{
		"data_parallel_rank": 3,
		"events": []any{map[string]any{
			"type": "BlockStored", "block_hashes": []any{unhex(t, plain0)}, "parent_block_hash": nil,
			"token_ids": seqTokens(0, 16), "block_size": 16, "medium": "GPU", "group_idx": 1,
		}},
		"ts":     2.5,
		"future": []any{1, 2},
	})
	require.NoError(t, err)
	b, err := kvevents.DecodeBatch(payload)
	require.NoError(t, err)
	require.Equal(t, 2.5, b.Timestamp)
	require.True(t, b.HasDataParallelRank)
	require.EqualValues(t, 3, b.DataParallelRank)
	require.Len(t, b.Events, 1)
	require.Equal(t, seqTokens(0, 16), b.Events[0].Tokens)
	require.True(t, b.Events[0].HasGroup)
	require.Equal(t, 1, b.Events[0].Group)

	for name, v := range map[string]any{
		"no events":         map[string]any{"ts": 1.0},
		"no ts":             map[string]any{"events": []any{}},
		"events not a list": map[string]any{"ts": 1.0, "events": 3},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := msgpack.Marshal(v)
			require.NoError(t, err)
			_, err = kvevents.DecodeBatch(p)
			require.ErrorIs(t, err, kvevents.ErrMalformed)
		})
	}
}
