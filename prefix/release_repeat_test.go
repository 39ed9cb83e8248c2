package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// TestReleaseRepeatedBlockKeepsLRUOrder releases a block listed twice (the caller holds it
// twice) around another one: the block's last touch is its last release, so the other
// block is older and goes first, and the eviction set stays a valid heap.
func TestReleaseRepeatedBlockKeepsLRUOrder(t *testing.T) {
	pool, x := newTestIndex(t, 8)
	ra := admit(t, x, pool, Prompt{Tokens: toks(100, testBS)})
	rc := admit(t, x, pool, Prompt{Tokens: toks(200, testBS)})
	a, c := ra.ids[0], rc.ids[0]
	require.NoError(t, x.Acquire([]blocks.ID{a})) // the caller now holds a twice

	require.NoError(t, x.Release([]blocks.ID{a, c, a})) // touches a, then c, then a
	require.NoError(t, x.CheckInvariants())
	require.Equal(t, 2, x.Reclaimable())

	require.Equal(t, 1, x.Evict(1))
	require.True(t, x.IsCached(a), "a was touched last, so c is evicted first")
	require.False(t, x.IsCached(c))
	require.NoError(t, x.CheckInvariants())
}
