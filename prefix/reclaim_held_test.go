package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// TestReclaimIntoChecksAVictimBeforeEvictingIt holds a cached, unpinned block through the
// pool behind the index's back (a broken invariant: only Acquire may add holders to a
// cached block) and makes it the victim of an allocation the handoff serves. The index
// must panic before it changes anything of that block: it stays cached, in the child
// table and in the eviction set, so that once the stray holder is gone the index and the
// pool are exactly as they were. The check used to run after the eviction, in a second
// pass over the victims.
func TestReclaimIntoChecksAVictimBeforeEvictingIt(t *testing.T) {
	pool, x := newTestIndex(t, 5) // 4 blocks and the null block
	p := Prompt{Tokens: toks(1, 4*testBS)}
	r := admit(t, x, pool, p)
	r.finish(t, x) // all 4 cached and unreferenced; nothing free
	require.Zero(t, pool.NumFree())
	leaf := r.ids[3] // the chain's only leaf: the only candidate
	before := snap(x, pool)
	evictable := x.policy.Len()

	require.NoError(t, pool.Retain(leaf)) // the stray holder
	require.Panics(t, func() { _, _ = pool.Allocate(nil, 1) })
	require.True(t, x.IsCached(leaf), "the victim was evicted before the check")
	require.Equal(t, evictable, x.policy.Len(), "the victim left the eviction set")
	require.NoError(t, pool.Release(leaf))
	require.NoError(t, x.CheckInvariants())
	require.Equal(t, before, snap(x, pool))

	// And the index goes on: the same allocation now evicts the leaf.
	ids, err := pool.Allocate(nil, 1)
	require.NoError(t, err)
	require.Equal(t, []blocks.ID{leaf}, ids)
	require.False(t, x.IsCached(leaf))
	require.NoError(t, x.CheckInvariants())
}
