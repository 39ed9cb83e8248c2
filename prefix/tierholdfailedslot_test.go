package prefix

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// A lower-tier slot a failed load hid (its bytes bad, dropped once the copies still
// reading it end) or doomed (the copy from such a slot, which lands nowhere) is no copy
// a hold can keep. Before, Hold counted it as held and copied nothing: once those copies
// ended the slot went, and a swapped-out sequence resumed found nothing in any tier.
// Hold now refuses while the block's tier-1 slot is such a slot (its copy has no slot
// until then), and copies the block from the device once the slot has gone. Both trees.
var failedSlotHoldCases = []struct {
	name string
	disk bool // a disk below the host: the host's write-through copy into it is in flight
}{
	{"a second load from the host in flight", false},
	{"the host's copy into the disk in flight, doomed", true},
}

func failedSlotTiers(disk bool) TierConfig {
	c := TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 4, Write: WriteThrough}}, BlockBytes: 1}
	if disk {
		c.Tiers = append(c.Tiers, TierSpec{Medium: MediumDisk, Capacity: 4, Write: WriteThrough})
	}
	return c
}

func TestIndexHoldOfAFailedLoadsSlot(t *testing.T) {
	for _, c := range failedSlotHoldCases {
		t.Run(c.name, func(t *testing.T) {
			pool, x := newTestIndex(t, 12, WithTiers(failedSlotTiers(c.disk)))
			p := Prompt{Tokens: toks(100, 9)} // 2 full blocks
			admit(t, x, pool, p).finish(t, x)
			completeAll(t, x, x.TakePlans(nil), true) // into the host
			var other TransferID                      // the copy still reading the host's slots
			if c.disk {
				plans := x.TakePlans(nil)
				require.Len(t, plans, 1, "the host's copy into the disk")
				other = plans[0].ID
			}
			require.Equal(t, 2, x.Evict(2))
			_, cur := x.Peek(nil, &p, LeaveOne)
			load := func() ([]blocks.ID, TransferID) {
				dst, err := pool.Allocate(nil, 2)
				require.NoError(t, err)
				ld, err := x.PrepareLoad(&p, cur, LeaveOne, dst)
				require.NoError(t, err)
				return dst, ld
			}
			dst1, ld1 := load()
			var dst2 []blocks.ID
			if !c.disk {
				dst2, other = load()
			}
			x.TakePlans(nil)
			_, err := x.CompleteTransfer(ld1, false) // the host's bytes are bad
			require.NoError(t, err)
			require.NoError(t, pool.Release(dst1...))

			// The sequence computes the blocks again and is swapped out.
			r := admit(t, x, pool, p)
			require.Zero(t, r.hit)
			ids := r.ids[:2]
			need, room := x.HoldNeed(ids)
			require.Equal(t, 2, need, "no tier holds a copy")
			require.Zero(t, room, "tier 1's slots are the failed load's until its copies end")
			before := snap(x, pool)
			_, err = x.Hold(ids)
			var full *TierFullError
			require.ErrorAs(t, err, &full)
			require.Equal(t, TierFullError{Requested: 2, Available: 0, InFlight: 2}, *full, "the copies reading the slots keep them: retry once they end")
			require.Equal(t, before, snap(x, pool), "a refused Hold changes nothing")

			_, err = x.CompleteTransfer(other, true)
			require.NoError(t, err)
			if dst2 != nil {
				require.NoError(t, pool.Release(dst2...))
			}
			require.NoError(t, x.CheckInvariants())
			need, room = x.HoldNeed(ids)
			require.Equal(t, 2, need)
			require.GreaterOrEqual(t, room, need)
			h, err := x.Hold(ids)
			require.NoError(t, err)
			completeAll(t, x, x.TakePlans(nil), true)
			r.finish(t, x)
			require.Equal(t, 2, x.HeldBlocks(h))
			x.Evict(pool.Capacity())
			_, cur = x.Peek(nil, &p, LeaveOne)
			require.Equal(t, 2, x.PeekLower(&p, cur, LeaveOne, 0).Blocks[1], "the resumed sequence finds its blocks in the host")
			require.NoError(t, x.CheckInvariants())
		})
	}
}

func TestGroupTreeHoldOfAFailedLoadsSlot(t *testing.T) {
	for _, c := range failedSlotHoldCases {
		t.Run(c.name, func(t *testing.T) {
			g := newTestTree(t, 12, 2, 1)
			require.NoError(t, g.SetTiers(failedSlotTiers(c.disk)))
			path := pathOf(g, RootNode, []int32{1, 2, 3, 4})
			for i, b := range []blocks.ID{3, 4} {
				require.NoError(t, g.Cache(b, path[i], 0))
				require.True(t, g.PrepareStore(b))
			}
			plans := g.TakePlans(nil)
			_, _, err := g.CompleteTransfer(plans[0].ID, true, nil) // into the host
			require.NoError(t, err)
			require.NoError(t, g.Uncache(3))
			require.NoError(t, g.Uncache(4))
			var other TransferID // the copy still reading the host's slots
			ld1, err := g.PrepareLoad([]GroupLoad{{Node: path[0], Dst: 5}, {Node: path[1], Dst: 6}})
			require.NoError(t, err)
			if !c.disk {
				other, err = g.PrepareLoad([]GroupLoad{{Node: path[0], Dst: 7}, {Node: path[1], Dst: 8}})
				require.NoError(t, err)
			}
			for _, pl := range g.TakePlans(plans[:0]) {
				if c.disk && pl.ID != ld1 {
					other = pl.ID
				}
			}
			require.NotZero(t, other)
			_, _, err = g.CompleteTransfer(ld1, false, nil) // the host's bytes are bad
			require.NoError(t, err)

			// The sequence computes the blocks again and is swapped out.
			ids := []blocks.ID{9, 10}
			for i, b := range ids {
				require.NoError(t, g.Cache(b, path[i], 0))
			}
			need, room := g.HoldNeed(ids)
			require.Equal(t, 2, need, "no tier holds a copy")
			require.Zero(t, room, "tier 1's slots are the failed load's until its copies end")
			require.False(t, g.PrepareStore(9), "tier 1's slot is busy")
			before := gtierDigest(g)
			_, stored, err := g.Hold(ids, nil)
			var full *TierFullError
			require.ErrorAs(t, err, &full)
			require.Equal(t, TierFullError{Requested: 2, Available: 0, InFlight: 2}, *full, "the copies reading the slots keep them: retry once they end")
			require.Empty(t, stored)
			require.Equal(t, before, gtierDigest(g), "a refused Hold changes nothing")

			_, _, err = g.CompleteTransfer(other, true, nil)
			require.NoError(t, err)
			require.NoError(t, g.CheckInvariants())
			need, room = g.HoldNeed(ids)
			require.Equal(t, 2, need)
			require.GreaterOrEqual(t, room, need)
			h, stored, err := g.Hold(ids, nil)
			require.NoError(t, err)
			require.Equal(t, ids, stored)
			for _, pl := range g.TakePlans(nil) {
				_, _, err = g.CompleteTransfer(pl.ID, true, nil)
				require.NoError(t, err)
			}
			for _, b := range ids {
				require.NoError(t, g.Uncache(b))
			}
			require.Equal(t, 2, g.HeldBlocks(h))
			require.Equal(t, Tier(1), g.LowerTier(path[0], 0), "the resumed sequence finds its blocks in the host")
			require.Equal(t, Tier(1), g.LowerTier(path[1], 0))
			require.NoError(t, g.CheckInvariants())
		})
	}
}

// gtierDigest is what a refused GroupTree call must leave as it was.
func gtierDigest(g *GroupTree) string {
	var b strings.Builder
	for tier := range Tier(g.NumTiers()) {
		fmt.Fprintf(&b, "|%+v", g.TierStatsOf(tier))
	}
	fmt.Fprintf(&b, "|%d %d %+v", g.PendingTransfers(), g.Holds(), g.Stats())
	for id := range blocks.ID(len(g.tiers.devRefs)) {
		fmt.Fprintf(&b, "|%v %d", g.IsCached(id), g.TransferRefs(id))
	}
	return b.String()
}
