package prefix

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// A hold makes room in a full host only from victims whose loss loses no copy the write
// policies promise. Under a write-back disk a host victim has no copy below (write-back
// copies it down only as the host evicts it): HoldNeed's room is the host's free slots
// alone, and the hold is refused, changing nothing (before, the hold dropped the victims
// at once, their KV lost, counted in the host's Lost). Under a write-through disk, or with
// no disk, the host's candidates are room, dropped at once: the disk keeps its copy, or
// the host was the last tier. Both trees follow the rule.
var holdRoomCases = []struct {
	name     string
	disk     *TierSpec
	room     int
	kept     Tier   // where the host's former prefix is found afterwards (0: nowhere)
	hostLost uint64 // host blocks lost to the hold
}{
	{"write-back disk", &TierSpec{Medium: MediumDisk, Capacity: 4, Write: WriteBack}, 0, 1, 0},
	{"write-through disk", &TierSpec{Medium: MediumDisk, Capacity: 4, Write: WriteThrough}, 2, 2, 0},
	{"no disk", nil, 2, 0, 2},
}

func TestIndexHoldRoomUnderWriteBackBelow(t *testing.T) {
	for _, c := range holdRoomCases {
		t.Run(c.name, func(t *testing.T) {
			tiers := []TierSpec{{Medium: MediumCPU, Capacity: 2}}
			if c.disk != nil {
				tiers = append(tiers, *c.disk)
			}
			pool, x := newTestIndex(t, 9, WithTiers(TierConfig{Tiers: tiers, BlockBytes: 1}))
			p1 := Prompt{Tokens: toks(100, 9)}
			r1 := admit(t, x, pool, p1)
			h1, err := x.Hold(r1.ids[:2])
			require.NoError(t, err)
			r1.finish(t, x)
			completeAll(t, x, x.TakePlans(nil), true)
			completeAll(t, x, x.TakePlans(nil), true) // the disk's write-through copy, if any
			require.NoError(t, x.ReleaseHold(h1))
			require.Equal(t, 2, x.TierStatsOf(1).Resident, "the host is full of candidates")

			r2 := admit(t, x, pool, Prompt{Tokens: toks(500, 9)})
			need, room := x.HoldNeed(r2.ids[:2])
			require.Equal(t, [2]int{2, c.room}, [2]int{need, room})
			before := dumpOf(t, x)
			h2, err := x.Hold(r2.ids[:2])
			if c.room < need {
				var full *TierFullError
				require.True(t, errors.As(err, &full))
				require.Equal(t, TierFullError{Requested: 2, Available: c.room}, *full)
				require.Equal(t, before, dumpOf(t, x), "a refused Hold changes nothing")
			} else {
				require.NoError(t, err)
				require.Equal(t, 2, x.HeldBlocks(h2))
			}
			h := x.PeekLower(&p1, Cursor{}, LeaveOne, 0)
			want := [MaxTiers]int{}
			want[c.kept] = 2
			want[0] = 0
			require.Equal(t, want, h.Blocks)
			require.Equal(t, c.hostLost, x.TierStatsOf(1).Lost)
			require.NoError(t, x.CheckInvariants())
			r2.finish(t, x)
			completeAll(t, x, x.TakePlans(nil), true)
			require.NoError(t, x.CheckInvariants())
		})
	}
}

func TestGroupTreeHoldRoomUnderWriteBackBelow(t *testing.T) {
	for _, c := range holdRoomCases {
		t.Run(c.name, func(t *testing.T) {
			tiers := []TierSpec{{Medium: MediumCPU, Capacity: 2}}
			if c.disk != nil {
				tiers = append(tiers, *c.disk)
			}
			g := newTestTree(t, 10, 2, 1)
			require.NoError(t, g.SetTiers(TierConfig{Tiers: tiers, BlockBytes: 100}))
			path := pathOf(g, RootNode, []int32{1, 2, 3, 4, 5, 6, 7, 8})
			for i, b := range []blocks.ID{1, 2, 3, 4} {
				require.NoError(t, g.Cache(b, path[i], 0))
			}
			require.True(t, g.PrepareStore(1))
			require.True(t, g.PrepareStore(2))
			for range 2 { // the host's copies, then the disk's write-through ones, if any
				for _, p := range g.TakePlans(nil) {
					_, _, err := g.CompleteTransfer(p.ID, true, nil)
					require.NoError(t, err)
				}
			}
			require.Equal(t, 2, g.TierStatsOf(1).Resident, "the host is full of candidates")

			need, room := g.HoldNeed([]blocks.ID{3, 4})
			require.Equal(t, [2]int{2, c.room}, [2]int{need, room})
			h, stored, err := g.Hold([]blocks.ID{3, 4}, nil)
			if c.room < need {
				var full *TierFullError
				require.True(t, errors.As(err, &full))
				require.Equal(t, TierFullError{Requested: 2, Available: c.room}, *full)
				require.Empty(t, stored)
				require.Zero(t, g.PendingTransfers())
			} else {
				require.NoError(t, err)
				require.Equal(t, []blocks.ID{3, 4}, stored)
				require.Equal(t, 2, g.HeldBlocks(h))
			}
			require.Equal(t, c.kept, g.LowerTier(path[0], 0))
			require.Equal(t, c.kept, g.LowerTier(path[1], 0))
			require.Equal(t, c.hostLost, g.TierStatsOf(1).Lost)
			require.NoError(t, g.CheckInvariants())
		})
	}
}
