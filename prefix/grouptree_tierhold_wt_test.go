package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// A held (node, group) whose host copy a failed load hid while the host's write-through
// copy of it into the disk was in flight is on no device and in no tier until that copy
// is confirmed, StreamOrdered or not: HoldInFlight counts it, and completing the copy
// (TakePlans handed it out) ends it, the disk then holding it. The trace of
// blocktable/hybrid's TestTierMachine at -rapid.seed=105.
func TestGroupTreeHoldInFlightWriteThroughFromFailedLoad(t *testing.T) {
	g := newTestTree(t, 10, 2, 2)
	require.NoError(t, g.SetTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 4},
		{Medium: MediumDisk, Capacity: 4, Write: WriteThrough}}, BlockBytes: 100}))
	path := pathOf(g, RootNode, []int32{1, 2})
	require.NoError(t, g.Cache(3, path[0], 0))
	require.True(t, g.PrepareStore(3))
	plans := g.TakePlans(nil)
	_, _, err := g.CompleteTransfer(plans[0].ID, true, nil) // the host's copy lands: one into the disk starts
	require.NoError(t, err)
	h, stored, err := g.Hold([]blocks.ID{3}, nil)
	require.NoError(t, err)
	require.Empty(t, stored, "the host holds it")
	require.Equal(t, 2, g.HeldBlocks(h), "the host's slot and the disk's pending one")
	require.NoError(t, g.Uncache(3))
	ld, err := g.PrepareLoad([]GroupLoad{{Node: path[0], Group: 0, Dst: 5}})
	require.NoError(t, err)
	plans = g.TakePlans(plans[:0])
	require.Len(t, plans, 2, "the disk's copy, the load")
	require.Zero(t, g.HoldInFlight(h), "the host holds it")
	_, _, err = g.CompleteTransfer(ld, false, nil)
	require.NoError(t, err)
	require.Equal(t, Device, g.LowerTier(path[0], 0), "the failed load hid the host's copy")
	require.Equal(t, 1, g.HoldInFlight(h), "only the disk's copy in flight")
	require.NoError(t, g.CheckInvariants())
	for _, p := range plans {
		if p.ID != ld {
			_, _, err = g.CompleteTransfer(p.ID, true, nil)
			require.NoError(t, err)
		}
	}
	require.Zero(t, g.PendingTransfers())
	require.Zero(t, g.HoldInFlight(h), "confirmed")
	require.Equal(t, Tier(2), g.LowerTier(path[0], 0))
	require.NoError(t, g.CheckInvariants())
	require.NoError(t, g.ReleaseHold(h))
	require.NoError(t, g.CheckInvariants())
}
