package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// A failed load from the host means the host's bytes are bad: the host's write-through
// copy of those blocks into the disk, still in flight, lands nowhere when it completes,
// whatever the server reports (before, it landed resident: the bad bytes spread to the
// disk). A copy confirmed before the load failed stands. Both trees follow the rule.
var failedSourceCases = []struct {
	name      string
	copyFirst bool // the disk's copy completes before the load fails
	copyOK    bool
	onDisk    bool // the disk holds the blocks at the end
}{
	{"copy ok after the failed load", false, true, false},
	{"copy failed after the failed load", false, false, false},
	{"copy ok before the failed load", true, true, true},
}

func TestIndexCopyFromFailedLoadLandsNowhere(t *testing.T) {
	for _, c := range failedSourceCases {
		t.Run(c.name, func(t *testing.T) {
			pool, x := newTestIndex(t, 9, WithTiers(TierConfig{Tiers: []TierSpec{
				{Medium: MediumCPU, Capacity: 4, Write: WriteThrough},
				{Medium: MediumDisk, Capacity: 4, Write: WriteThrough},
			}, BlockBytes: 1}))
			p := Prompt{Tokens: toks(100, 9)} // 2 full blocks
			admit(t, x, pool, p).finish(t, x)
			completeAll(t, x, x.TakePlans(nil), true) // into the host; the disk's copy starts
			require.Equal(t, 2, x.Evict(2))
			_, cur := x.Peek(nil, &p, LeaveOne)
			dst, err := pool.Allocate(nil, 2)
			require.NoError(t, err)
			ld, err := x.PrepareLoad(&p, cur, LeaveOne, dst)
			require.NoError(t, err)
			plans := x.TakePlans(nil)
			require.Len(t, plans, 2, "the disk's copy, the load")
			var cp TransferID
			for _, pl := range plans {
				if pl.ID != ld {
					cp = pl.ID
				}
			}
			if c.copyFirst {
				_, err = x.CompleteTransfer(cp, c.copyOK)
				require.NoError(t, err)
			}
			_, err = x.CompleteTransfer(ld, false)
			require.NoError(t, err)
			require.NoError(t, x.CheckInvariants())
			if !c.copyFirst {
				res, err := x.CompleteTransfer(cp, c.copyOK)
				require.NoError(t, err)
				require.Equal(t, c.copyOK, res.OK, "OK is what the server reported")
			}
			require.NoError(t, pool.Release(dst...))
			require.NoError(t, x.CheckInvariants())
			want, stored, failed := 0, uint64(0), uint64(2)
			if c.onDisk {
				want, stored, failed = 2, 2, 0
			}
			require.Equal(t, [MaxTiers]int{0, 0, want, 0}, x.PeekLower(&p, cur, LeaveOne, 0).Blocks)
			require.Equal(t, want, x.TierStatsOf(2).Resident)
			require.Zero(t, x.TierStatsOf(2).Pending)
			require.Equal(t, stored, x.TierStatsOf(2).Stored)
			require.Equal(t, failed, x.TierStatsOf(2).StoreFailed)
		})
	}
}

func TestGroupTreeCopyFromFailedLoadLandsNowhere(t *testing.T) {
	for _, c := range failedSourceCases {
		t.Run(c.name, func(t *testing.T) {
			g := newTestTree(t, 10, 2, 1)
			require.NoError(t, g.SetTiers(TierConfig{Tiers: []TierSpec{
				{Medium: MediumCPU, Capacity: 4, Write: WriteThrough},
				{Medium: MediumDisk, Capacity: 4, Write: WriteThrough},
			}, BlockBytes: 1}))
			path := pathOf(g, RootNode, []int32{1, 2, 3, 4})
			for i, b := range []blocks.ID{3, 4} {
				require.NoError(t, g.Cache(b, path[i], 0))
				require.True(t, g.PrepareStore(b))
			}
			plans := g.TakePlans(nil)
			_, _, err := g.CompleteTransfer(plans[0].ID, true, nil) // into the host; the disk's copy starts
			require.NoError(t, err)
			require.NoError(t, g.Uncache(3))
			require.NoError(t, g.Uncache(4))
			ld, err := g.PrepareLoad([]GroupLoad{{Node: path[0], Dst: 5}, {Node: path[1], Dst: 6}})
			require.NoError(t, err)
			plans = g.TakePlans(plans[:0])
			require.Len(t, plans, 2, "the disk's copy, the load")
			var cp TransferID
			for _, pl := range plans {
				if pl.ID != ld {
					cp = pl.ID
				}
			}
			if c.copyFirst {
				_, _, err = g.CompleteTransfer(cp, c.copyOK, nil)
				require.NoError(t, err)
			}
			_, _, err = g.CompleteTransfer(ld, false, nil)
			require.NoError(t, err)
			require.NoError(t, g.CheckInvariants())
			if !c.copyFirst {
				res, _, err := g.CompleteTransfer(cp, c.copyOK, nil)
				require.NoError(t, err)
				require.Equal(t, c.copyOK, res.OK, "OK is what the server reported")
			}
			require.NoError(t, g.CheckInvariants())
			want, stored, failed := Device, uint64(0), uint64(2)
			if c.onDisk {
				want, stored, failed = 2, 2, 0
			}
			require.Equal(t, want, g.LowerTier(path[0], 0))
			require.Equal(t, want, g.LowerTier(path[1], 0))
			require.Zero(t, g.TierStatsOf(2).Pending)
			require.Equal(t, stored, g.TierStatsOf(2).Stored)
			require.Equal(t, failed, g.TierStatsOf(2).StoreFailed)
		})
	}
}
