package prefix

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// One rule for both trees' Hold: it takes cached blocks only. An uncached block (a free
// one, the null block, an ID outside the pool) is refused with ErrNotCached in a
// *BlockError naming it, changing nothing; HoldNeed counts an uncached block of the pool
// but the null block (never cached: no copy of it is made) as one copy (the caller caches
// it before Hold) and one outside it not at all. Before, a
// GroupTree's Hold skipped uncached blocks and its HoldNeed did not count them.
func TestHoldRefusesUncachedInBothTrees(t *testing.T) {
	for _, c := range []struct {
		name     string
		uncached blocks.ID
		need     int // HoldNeed of the cached block and the uncached one
	}{
		{"a free block", 7, 2},
		{"the null block", blocks.NullID, 1},
		{"outside the pool", 99, 1},
		{"negative", -3, 1},
	} {
		t.Run("Index "+c.name, func(t *testing.T) {
			pool, x := newTestIndex(t, 9, WithTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 4}}, BlockBytes: 1}))
			r := admit(t, x, pool, Prompt{Tokens: toks(100, 5)}) // one full block
			ids := []blocks.ID{r.ids[0], c.uncached}
			need, room := x.HoldNeed(ids)
			require.Equal(t, [2]int{c.need, 4}, [2]int{need, room})
			before := dumpOf(t, x)
			h, err := x.Hold(ids)
			require.True(t, errors.Is(err, ErrNotCached))
			var be *BlockError
			require.ErrorAs(t, err, &be)
			require.Equal(t, c.uncached, be.ID)
			require.Zero(t, h)
			require.Equal(t, before, dumpOf(t, x))
			require.Zero(t, x.PendingTransfers())
			require.NoError(t, x.CheckInvariants())
		})
		t.Run("GroupTree "+c.name, func(t *testing.T) {
			g := newTestTree(t, 10, 2, 1)
			require.NoError(t, g.SetTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 4}}, BlockBytes: 1}))
			path := pathOf(g, RootNode, []int32{1, 2})
			require.NoError(t, g.Cache(3, path[0], 0))
			ids := []blocks.ID{3, c.uncached}
			need, room := g.HoldNeed(ids)
			require.Equal(t, [2]int{c.need, 4}, [2]int{need, room})
			h, stored, err := g.Hold(ids, nil)
			require.True(t, errors.Is(err, ErrNotCached))
			var be *BlockError
			require.ErrorAs(t, err, &be)
			require.Equal(t, c.uncached, be.ID)
			require.Zero(t, h)
			require.Empty(t, stored)
			require.Zero(t, g.PendingTransfers())
			require.Zero(t, g.Holds())
			require.Zero(t, g.TierStatsOf(1).Pending)
			require.NoError(t, g.CheckInvariants())
		})
	}
}
