package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// A host victim written back to a write-back disk to make room stays in the host if that
// copy fails: it still holds the block, as a failed demotion's device block does (before,
// its slot was dropped when the failed copy ended, the block lost from every tier). A
// copy that succeeds moves it to the disk. Both trees.
func TestFailedWriteBackKeepsSource(t *testing.T) {
	tiers := []TierSpec{{Medium: MediumCPU, Capacity: 1}, {Medium: MediumDisk, Capacity: 2, Write: WriteBack}}
	for _, ok := range []bool{false, true} {
		want, lost := Tier(1), uint64(0)
		if ok {
			want = 2
		}
		t.Run(map[bool]string{false: "Index, copy failed", true: "Index, copy ok"}[ok], func(t *testing.T) {
			pool, x := newTestIndex(t, 9, WithTiers(TierConfig{Tiers: tiers, BlockBytes: 1, FreeTarget: 8}))
			pa, pb := Prompt{Tokens: toks(7, 5)}, Prompt{Tokens: toks(70, 5)}
			admit(t, x, pool, pa).finish(t, x)
			completeAll(t, x, x.TakePlans(nil), true) // pa's block demoted into the host
			admit(t, x, pool, pb).finish(t, x)
			plans := x.TakePlans(nil) // pb's demotion writes pa's down to make room
			require.Len(t, plans, 1)
			require.Equal(t, Tier(1), plans[0].From)
			completeAll(t, x, plans, ok)
			h := x.PeekLower(&pa, Cursor{}, LeaveOne, 0)
			require.Equal(t, 1, h.Blocks[want], "pa's block in tier %d", want)
			require.Equal(t, 1, h.Lower)
			require.Equal(t, lost, x.TierStatsOf(1).Lost)
			require.NoError(t, x.CheckInvariants())
		})
		t.Run(map[bool]string{false: "GroupTree, copy failed", true: "GroupTree, copy ok"}[ok], func(t *testing.T) {
			g := newTestTree(t, 10, 2, 1)
			require.NoError(t, g.SetTiers(TierConfig{Tiers: tiers, BlockBytes: 100}))
			path := pathOf(g, RootNode, []int32{1, 2, 3, 4})
			require.NoError(t, g.Cache(3, path[0], 0))
			require.NoError(t, g.Cache(4, path[1], 0))
			require.True(t, g.PrepareStore(3))
			for _, p := range g.TakePlans(nil) {
				_, _, err := g.CompleteTransfer(p.ID, true, nil)
				require.NoError(t, err)
			}
			require.False(t, g.PrepareStore(blocks.ID(4)), "no slot now: the host's victim is written down")
			plans := g.TakePlans(nil)
			require.Len(t, plans, 1)
			require.Equal(t, Tier(1), plans[0].From)
			_, _, err := g.CompleteTransfer(plans[0].ID, ok, nil)
			require.NoError(t, err)
			require.Equal(t, want, g.LowerTier(path[0], 0))
			require.Equal(t, lost, g.TierStatsOf(1).Lost)
			require.NoError(t, g.CheckInvariants())
		})
	}
}
