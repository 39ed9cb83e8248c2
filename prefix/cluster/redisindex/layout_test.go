package redisindex_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

func newIndex(t testing.TB, rdb redis.UniversalClient) *redisindex.Index {
	t.Helper()
	x, err := redisindex.New(context.Background(), rdb, redisindex.Config{BlockSize: 16, Seed: fixtureSeed, Model: fixtureModel})
	require.NoError(t, err)
	return x
}

func applyFixture(t testing.TB, x *redisindex.Index) {
	t.Helper()
	for _, fb := range fixtureBatches() {
		b, err := kvevents.DecodeBatch(fb.payload)
		require.NoError(t, err)
		require.NoError(t, x.ApplyContext(context.Background(), fb.pod, b))
	}
}

// TestLayoutMatchesLLMD writes the fixture's batches through the kvpage backend and
// compares the whole keyspace, byte for byte, with what llm-d's own event pool and
// RedisIndex wrote from the same batches.
func TestLayoutMatchesLLMD(t *testing.T) {
	rdb := client(t)
	x := newIndex(t, rdb)
	applyFixture(t, x)
	require.Equal(t, readTestdata(t, "llmd/keys.txt"), dump(t, rdb))
	st := x.Stats()
	require.Equal(t, uint64(1), st.Orphans, "pod-c's block with an unknown parent is skipped, as llm-d skips it")
	require.Equal(t, uint64(1), st.Cleared)

	// Applying every batch again changes nothing: writes are idempotent, which is what
	// makes a retry after ErrUnavailable safe.
	applyFixture(t, x)
	require.Equal(t, readTestdata(t, "llmd/keys.txt"), dump(t, rdb))
}

// TestPrimitivesLayout pins the layout of Add and Evict themselves: the field is llm-d's
// PodEntry JSON with an empty value, the engine set scores pairs by position.
func TestPrimitivesLayout(t *testing.T) {
	rdb := client(t)
	x := newIndex(t, rdb)
	ctx := context.Background()
	e := redisindex.Entry{Server: "pod-x", Tier: "gpu", HasGroup: true, Group: 2}
	require.NoError(t, x.Add(ctx, []uint64{7, 8}, []uint64{70, 80, 90, 100}, []redisindex.Entry{e}))
	const f = `{"PodIdentifier":"pod-x","DeviceTier":"gpu","Speculative":false,"HasGroup":true,"GroupIdx":2}`
	require.Equal(t, ""+
		"hash 100 "+f+" \"\"\n"+
		"hash 70 "+f+" \"\"\n"+
		"hash 80 "+f+" \"\"\n"+
		"hash 90 "+f+" \"\"\n"+
		"zset engine:7 0 70\n"+
		"zset engine:7 1 80\n"+
		"zset engine:8 2 90\n"+
		"zset engine:8 3 100\n", dump(t, rdb))
	k, ok, err := x.RequestKey(ctx, 8)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(100), k, "the highest score, as llm-d's GetRequestKey")

	require.NoError(t, x.Evict(ctx, []uint64{7, 12345}, []redisindex.Entry{e}))
	require.Equal(t, ""+
		"hash 100 "+f+" \"\"\n"+
		"hash 90 "+f+" \"\"\n"+
		"zset engine:8 2 90\n"+
		"zset engine:8 3 100\n", dump(t, rdb), "emptied hashes and their engine set pruned")

	other := redisindex.Entry{Server: "pod-y", Tier: "cpu"}
	require.NoError(t, x.Add(ctx, nil, []uint64{90}, []redisindex.Entry{other}))
	require.NoError(t, x.Evict(ctx, []uint64{8}, []redisindex.Entry{e}))
	require.Equal(t, ""+
		"hash 90 "+other.Field()+" \"\"\n"+
		"zset engine:8 2 90\n"+
		"zset engine:8 3 100\n", dump(t, rdb), "an engine set stays while one of its blocks is held")
}
