package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// A namespace over its quota loses its own least recently used blocks, never another's.
func TestQuotaEvictsTheNamespacesOwnBlocks(t *testing.T) {
	pool, x := newTestIndex(t, 33, WithQuotas(), WithEvictionHistory(64))
	victim := Namespace{Salt: "victim"}
	flood := Namespace{Salt: "flood"}
	v := admit(t, x, pool, Prompt{Namespace: victim, Tokens: toks(1, 4*testBS)})
	v.finish(t, x) // the victim's 4 blocks: the oldest in the cache
	require.NoError(t, x.SetQuota(flood, 6))
	var last *request
	for i := range 5 {
		r := admit(t, x, pool, Prompt{Namespace: flood, Tokens: toks(int32(1000*(i+1)), 3*testBS)})
		r.finish(t, x)
		last = r
		max, cached, ok := x.Quota(flood)
		require.True(t, ok)
		require.Equal(t, 6, max)
		require.LessOrEqual(t, cached, 6)
		require.NoError(t, x.CheckInvariants())
	}
	for _, id := range v.ids {
		require.True(t, x.IsCached(id), "the victim's blocks are never evicted for the flood's quota")
	}
	for _, id := range last.ids {
		require.True(t, x.IsCached(id), "the flood's newest blocks stay")
	}
	require.Equal(t, 4+6, x.Stats().Cached)
	var e Explanation
	x.Explain(nil, &Prompt{Namespace: flood, Tokens: toks(1000, 3*testBS+1)}, leaveOne, &e)
	require.Equal(t, MissEvicted, e.Reason)
	require.Equal(t, EvictQuota, e.Evicted)

	// Held blocks are not evicted for a quota: the namespace stays over until released.
	held := admit(t, x, pool, Prompt{Namespace: flood, Tokens: toks(9000, 8*testBS)})
	_, cached, _ := x.Quota(flood)
	require.Equal(t, 8, cached, "only the 8 held blocks are left")
	held.finish(t, x)
	r := admit(t, x, pool, Prompt{Namespace: flood, Tokens: toks(7000, 1*testBS)})
	r.finish(t, x)
	_, cached, _ = x.Quota(flood)
	require.Equal(t, 6, cached)
	require.NoError(t, x.CheckInvariants())

	// Global pressure still evicts in the global order.
	ids, err := pool.Allocate(nil, pool.NumFree()+1)
	require.NoError(t, err)
	require.False(t, x.IsCached(v.ids[3]), "the oldest block overall went for the pool")
	require.NoError(t, pool.Release(ids...))
	require.NoError(t, x.Reset())
	_, cached, _ = x.Quota(flood)
	require.Zero(t, cached)
	require.NoError(t, x.SetQuota(flood, -1))
	_, _, ok := x.Quota(flood)
	require.False(t, ok)
}

func TestQuotaCountsBlocksCachedBeforeTheCap(t *testing.T) {
	pool, x := newTestIndex(t, 33, WithQuotas())
	ns := Namespace{LoRA: "a"}
	admit(t, x, pool, Prompt{Namespace: ns, Tokens: toks(1, 5*testBS)}).finish(t, x)
	require.NoError(t, x.SetQuota(ns, 2))
	_, cached, _ := x.Quota(ns)
	require.Equal(t, 5, cached)
	admit(t, x, pool, Prompt{Namespace: ns, Tokens: toks(100, testBS)}).finish(t, x)
	_, cached, _ = x.Quota(ns)
	require.Equal(t, 2, cached)
	require.NoError(t, x.CheckInvariants())
}

func TestQuotaNeedsWithQuotas(t *testing.T) {
	_, x := newTestIndex(t, 8)
	require.ErrorIs(t, x.SetQuota(Namespace{Salt: "a"}, 3), ErrInvalidArgument)
	_ = blocks.NullID
}
