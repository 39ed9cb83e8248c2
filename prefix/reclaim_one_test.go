package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/internal/poolrefs"
	"github.com/stretchr/testify/require"
)

// A one-block allocation through poolrefs.AllocateOne (the Manager's decode step, which
// reaches the index's ReclaimOne) evicts the victim Pool.Allocate(nil, 1) would, with the
// same counters, events and tree, allocation after allocation until the cache runs dry:
// on the plain path (evictLeaf) and on ReclaimInto's (an observer), under LRU and another
// policy.
func TestReclaimOneMatchesReclaimInto(t *testing.T) {
	lfu, err := evict.ByName("lfu")
	require.NoError(t, err)
	setups := map[string]func() []Option{
		"plain":    func() []Option { return nil },
		"observer": func() []Option { return []Option{WithObserver(&eventLog{})} },
		"lfu":      func() []Option { return []Option{WithPolicy(lfu)} },
	}
	for name, opts := range setups {
		t.Run(name, func(t *testing.T) {
			one, ox := newTestIndex(t, 17, opts()...)
			ref, rx := newTestIndex(t, 17, opts()...)
			for _, side := range []struct {
				x    *Index
				pool *blocks.Pool
			}{{ox, one}, {rx, ref}} {
				// Three prompts: two share a first block, so an eviction leaves a parent
				// with a child and later one without, which becomes a candidate.
				for _, p := range []Prompt{
					{Tokens: toks(1, 5*testBS)},
					{Tokens: cat(toks(1, testBS), toks(100, 4*testBS))},
					{Tokens: toks(200, 3*testBS)},
				} {
					admit(t, side.x, side.pool, p).finish(t, side.x)
				}
			}
			require.Equal(t, 4, one.NumFree()) // the free list first, then evictions
			for i := 0; ; i++ {
				id, ok := poolrefs.AllocateOne(one)
				want, err := ref.Allocate(nil, 1)
				if !ok {
					require.Error(t, err, "allocation %d: AllocateOne refused what Allocate served", i)
					break
				}
				require.NoError(t, err)
				require.Equal(t, want, []blocks.ID{blocks.ID(id)}, "allocation %d", i)
				require.Equal(t, snap(rx, ref), snap(ox, one), "allocation %d", i)
				require.Equal(t, rx.policy.Len(), ox.policy.Len(), "allocation %d", i)
				require.NoError(t, ox.CheckInvariants())
				if name == "observer" {
					require.Equal(t, rx.obs.(*eventLog).events, ox.obs.(*eventLog).events, "allocation %d", i)
				}
			}
			require.Zero(t, ox.Reclaimable())
		})
	}
}

// ReclaimOne checks its victim before it changes anything of it, as ReclaimInto does
// (TestReclaimIntoChecksAVictimBeforeEvictingIt).
func TestReclaimOneChecksAVictimBeforeEvictingIt(t *testing.T) {
	pool, x := newTestIndex(t, 5)
	r := admit(t, x, pool, Prompt{Tokens: toks(1, 4*testBS)})
	r.finish(t, x)
	leaf := r.ids[3]
	before := snap(x, pool)
	require.NoError(t, pool.Retain(leaf)) // a stray holder behind the index's back
	require.Panics(t, func() { poolrefs.AllocateOne(pool) })
	require.True(t, x.IsCached(leaf))
	require.NoError(t, pool.Release(leaf))
	require.NoError(t, x.CheckInvariants())
	require.Equal(t, before, snap(x, pool))
}
