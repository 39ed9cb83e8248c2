package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// A held (node, group) whose host copy a failed load hid while the host's write-through
// copy of it into the disk was in flight (the trace of blocktable/hybrid's TestTierMachine
// at -rapid.seed=105): that copy reads bytes the load found bad, so it will land nowhere
// and HoldInFlight does not count it (before, it did, and completing the copy made the
// disk hold the bad bytes). Completing it drops the disk's slot and the hold's last copy.
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
	require.Zero(t, g.HoldInFlight(h), "the disk's copy reads bad bytes: nothing to wait for")
	require.NoError(t, g.CheckInvariants())
	for _, p := range plans {
		if p.ID != ld {
			_, _, err = g.CompleteTransfer(p.ID, true, nil)
			require.NoError(t, err)
		}
	}
	require.Zero(t, g.PendingTransfers())
	require.Equal(t, Device, g.LowerTier(path[0], 0), "the disk's copy landed nowhere")
	require.Zero(t, g.HeldBlocks(h))
	require.Equal(t, uint64(1), g.TierStatsOf(2).StoreFailed)
	require.NoError(t, g.CheckInvariants())
	require.NoError(t, g.ReleaseHold(h))
	require.NoError(t, g.CheckInvariants())
}
