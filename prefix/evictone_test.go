package prefix

import (
	"math/rand/v2"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// evictOne, the one-block allocation's eviction, picks the same victims in the same order
// as evictInto(ids, 1), leaves the policy in the same state (the next victims agree too)
// and keeps every invariant: two indexes built alike, one evicting through each, along
// paths that share prefixes (a victim's parent then stays or becomes a candidate).
func TestEvictOneMatchesEvictInto(t *testing.T) {
	build := func() (*blocks.Pool, *Index) {
		pool, x := newTestIndex(t, 64)
		r := rand.New(rand.NewPCG(7, 8))
		for {
			n := 1 + r.IntN(5)
			if pool.Available() < n || x.Reclaimable() > 0 && pool.Available()-x.Reclaimable() < n {
				break
			}
			ids, err := pool.Allocate(nil, n)
			require.NoError(t, err)
			toks := make([]int32, n*testBS)
			for i := range toks {
				toks[i] = int32(r.IntN(3)) // few distinct tokens: shared prefixes, branches
			}
			var c Cursor
			_, err = x.Commit(&c, &Prompt{Tokens: toks}, ids)
			require.NoError(t, err)
			require.NoError(t, x.Release(ids))
		}
		require.NoError(t, x.CheckInvariants())
		return pool, x
	}
	_, a := build()
	_, b := build()
	require.True(t, a.plainEviction())
	require.Positive(t, a.Reclaimable())
	for a.Reclaimable() > 0 {
		got := a.evictOne(nil)
		want := b.evictInto(nil, 1)
		require.Equal(t, want, got)
		require.NoError(t, a.pool.Release(got...))
		require.NoError(t, b.pool.Release(want...))
		a.evicted(got)
		b.evicted(want)
		require.NoError(t, a.CheckInvariants())
		require.Equal(t, b.Reclaimable(), a.Reclaimable())
	}
	require.Empty(t, b.evictInto(nil, 1))
	require.Empty(t, a.evictOne(nil))
}
