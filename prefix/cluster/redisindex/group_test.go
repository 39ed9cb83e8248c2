package redisindex_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// A hybrid server's events carry group_idx: Apply writes each group's entry as llm-d's
// event pool does (HasGroup true, GroupIdx), one field per group, and a removal in one
// group leaves the other's field.
func TestApplyWritesGroup(t *testing.T) {
	rdb := client(t)
	x := newIndex(t, rdb)
	ctx := context.Background()
	toks := make([]int32, 16)
	for i := range toks {
		toks[i] = int32(100 + i)
	}
	apply := func(events ...any) {
		t.Helper()
		payload, err := msgpack.Marshal([]any{1.0, events, 0})
		require.NoError(t, err)
		b, err := kvevents.DecodeBatch(payload)
		require.NoError(t, err)
		require.NoError(t, x.ApplyContext(ctx, "pod-h", b))
	}
	apply(
		[]any{"BlockStored", []any{uint64(41)}, nil, toks, 16, nil, "GPU", nil, nil, 0},
		[]any{"BlockStored", []any{uint64(41)}, nil, toks, 16, nil, "GPU", nil, nil, 1, "sliding_window", 64},
	)
	rk, ok, err := x.RequestKey(ctx, 41)
	require.NoError(t, err)
	require.True(t, ok)
	const (
		g0 = `{"PodIdentifier":"pod-h","DeviceTier":"gpu","Speculative":false,"HasGroup":true,"GroupIdx":0}`
		g1 = `{"PodIdentifier":"pod-h","DeviceTier":"gpu","Speculative":false,"HasGroup":true,"GroupIdx":1}`
	)
	key := redisindex.RequestKeyString(rk)
	fields, err := rdb.HKeys(ctx, key).Result()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{g0, g1}, fields)

	apply([]any{"BlockRemoved", []any{uint64(41)}, "GPU", 1})
	fields, err = rdb.HKeys(ctx, key).Result()
	require.NoError(t, err)
	require.Equal(t, []string{g0}, fields, "the sliding-window group's removal keeps the full-attention entry")

	// An event without a group names the entry without one, as before: it does not
	// remove a group's entry.
	apply([]any{"BlockRemoved", []any{uint64(41)}, "GPU"})
	fields, err = rdb.HKeys(ctx, key).Result()
	require.NoError(t, err)
	require.Equal(t, []string{g0}, fields)
	apply([]any{"BlockRemoved", []any{uint64(41)}, "GPU", 0})
	n, err := rdb.Exists(ctx, key).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the emptied hash is pruned")
}
