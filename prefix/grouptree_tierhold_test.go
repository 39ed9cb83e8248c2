package prefix

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/stretchr/testify/require"
)

// A hold keeps a GroupTree's host copies from eviction: a hold that fits the host's two
// slots succeeds, one past it is refused changing nothing, and released copies make room
// again; a failed copy drops its held slot.
func TestGroupTreeHold(t *testing.T) {
	g := newTestTree(t, 10, 2, 2)
	require.NoError(t, g.SetTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 2}}, BlockBytes: 100}))
	path := pathOf(g, RootNode, []int32{1, 2, 3, 4, 5, 6})
	for i, b := range []blocks.ID{3, 4, 5} {
		require.NoError(t, g.Cache(b, path[i], 0))
	}
	need, room := g.HoldNeed([]blocks.ID{3, 4, 3})
	require.Equal(t, [2]int{2, 2}, [2]int{need, room}, "a block listed twice counts once")
	h, stored, err := g.Hold([]blocks.ID{3, 4}, nil)
	require.NoError(t, err)
	require.Equal(t, []blocks.ID{3, 4}, stored)
	plans := g.TakePlans(nil)
	require.Len(t, plans, 1)
	_, _, err = g.CompleteTransfer(plans[0].ID, true, nil)
	require.NoError(t, err)
	require.Equal(t, 2, g.HeldBlocks(h))
	require.NoError(t, g.CheckInvariants())

	need, room = g.HoldNeed([]blocks.ID{5})
	require.Equal(t, [2]int{1, 0}, [2]int{need, room}, "both host slots held")
	_, stored, err = g.Hold([]blocks.ID{5}, nil)
	var full *TierFullError
	require.True(t, errors.As(err, &full))
	require.Equal(t, TierFullError{Requested: 1, Available: 0}, *full)
	require.Empty(t, stored)
	require.Zero(t, g.PendingTransfers())
	require.False(t, g.PrepareStore(5), "no victim to make room with")
	require.Equal(t, Tier(1), g.LowerTier(path[0], 0))
	require.NoError(t, g.CheckInvariants())

	require.NoError(t, g.ReleaseHold(h))
	require.ErrorIs(t, g.ReleaseHold(h), ErrUnknownHold)
	require.Zero(t, g.Holds())
	h2, stored, err := g.Hold([]blocks.ID{5}, nil)
	require.NoError(t, err)
	require.Equal(t, []blocks.ID{5}, stored, "released: a copy evicted to make room")
	require.Equal(t, uint64(1), g.TierStatsOf(1).Evicted)
	g.TakePlans(plans[:0])
	_, _, err = g.CompleteTransfer(plans[0].ID, false, nil)
	require.NoError(t, err)
	require.Zero(t, g.HeldBlocks(h2), "the failed copy dropped the held slot")
	require.NoError(t, g.CheckInvariants())
	require.NoError(t, g.ReleaseHold(h2))
	require.NoError(t, g.CheckInvariants())
}

// Two device blocks cached for one (node, group) (a duplicate) need one copy: HoldNeed
// counts them once, so that a hold Hold can place is not refused as past the tier's room.
func TestGroupTreeHoldNeedCountsDuplicateOnce(t *testing.T) {
	g := newTestTree(t, 10, 2, 2)
	require.NoError(t, g.SetTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 1}}, BlockBytes: 100}))
	path := pathOf(g, RootNode, []int32{1, 2})
	require.NoError(t, g.Cache(3, path[0], 0))
	require.NoError(t, g.Cache(4, path[0], 0)) // a duplicate of 3
	need, room := g.HoldNeed([]blocks.ID{3, 4})
	require.Equal(t, [2]int{1, 1}, [2]int{need, room})
	h, stored, err := g.Hold([]blocks.ID{3, 4}, nil)
	require.NoError(t, err)
	require.Equal(t, []blocks.ID{3}, stored)
	require.Equal(t, 1, g.HeldBlocks(h))
	require.NoError(t, g.CheckInvariants())
}

// As an Index's: a GroupTree's Hold panics on a copy HoldNeed counted that cannot be
// prepared (a tier policy breaking its contract), rather than hold less than it was given.
func TestGroupTreeHoldPanicsOnBrokenInvariant(t *testing.T) {
	var pol *brokenVictims
	g := newTestTree(t, 10, 2, 2)
	require.NoError(t, g.SetTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 1,
		Policy: func(n int, c evict.Clock) (evict.Policy, error) {
			lru, err := evict.NewLRU(n)
			pol = &brokenVictims{Policy: lru}
			return pol, err
		}}}, BlockBytes: 100}))
	path := pathOf(g, RootNode, []int32{1, 2, 3, 4})
	require.NoError(t, g.Cache(3, path[0], 0))
	require.NoError(t, g.Cache(4, path[1], 0))
	require.True(t, g.PrepareStore(3))
	plans := g.TakePlans(nil)
	_, _, err := g.CompleteTransfer(plans[0].ID, true, nil)
	require.NoError(t, err)
	pol.broken = true
	require.PanicsWithValue(t, "kvpage: broken invariant: Hold could not copy block 4 that HoldNeed counted", func() {
		_, _, _ = g.Hold([]blocks.ID{4}, nil)
	})
}

// Under StreamOrdered a hold's copies handed out by TakePlans, their device blocks
// released by the owner, are the only copies and in flight: HoldInFlight counts each
// (node, group) once until CompleteTransfer confirms it. A block still on the device, or
// a copy confirmed, is not in flight; nor is anything without tiers or for an unknown hold.
func TestGroupTreeHoldInFlight(t *testing.T) {
	g := newTestTree(t, 10, 2, 2)
	require.Zero(t, g.HoldInFlight(1), "no tiers")
	require.NoError(t, g.SetTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 4}}, BlockBytes: 100, StreamOrdered: true}))
	path := pathOf(g, RootNode, []int32{1, 2, 3, 4, 5, 6})
	for i, b := range []blocks.ID{3, 4, 5} {
		require.NoError(t, g.Cache(b, path[i], 0))
	}
	require.NoError(t, g.Cache(6, path[0], 0)) // a duplicate of 3: one (node, group)
	h, stored, err := g.Hold([]blocks.ID{3, 6, 4, 5}, nil)
	require.NoError(t, err)
	require.Equal(t, []blocks.ID{3, 4, 5}, stored)
	require.Zero(t, g.HoldInFlight(h), "prepared, not handed out: still on the device")
	plans := g.TakePlans(nil)
	require.Len(t, plans, 1)
	require.Zero(t, g.HoldInFlight(h), "handed out, the device blocks still cached")
	for _, b := range []blocks.ID{3, 4} {
		require.NoError(t, g.Uncache(b))
	}
	require.Equal(t, 1, g.HoldInFlight(h), "3's duplicate 6 keeps its (node, group) on the device")
	require.NoError(t, g.Uncache(6))
	require.Equal(t, 2, g.HoldInFlight(h))
	require.Zero(t, g.HoldInFlight(h+1), "an unknown hold")
	require.NoError(t, g.CheckInvariants())
	_, _, err = g.CompleteTransfer(plans[0].ID, true, nil)
	require.NoError(t, err)
	require.Zero(t, g.HoldInFlight(h), "confirmed: the host holds them")
	require.Equal(t, 3, g.HeldBlocks(h))
	require.NoError(t, g.ReleaseHold(h))
	require.Zero(t, g.HoldInFlight(h))
	require.NoError(t, g.CheckInvariants())
}

// A held slot whose load failed while another load still reads it is pending and leaving:
// it is being dropped, no copy into it is under way, so HoldInFlight does not count it.
func TestGroupTreeHoldInFlightSkipsFailedLoad(t *testing.T) {
	g := newTestTree(t, 10, 2, 2)
	require.NoError(t, g.SetTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 4}}, BlockBytes: 100}))
	path := pathOf(g, RootNode, []int32{1, 2})
	require.NoError(t, g.Cache(3, path[0], 0))
	require.True(t, g.PrepareStore(3))
	plans := g.TakePlans(nil)
	_, _, err := g.CompleteTransfer(plans[0].ID, true, nil)
	require.NoError(t, err)
	h, _, err := g.Hold([]blocks.ID{3}, nil)
	require.NoError(t, err)
	require.NoError(t, g.Uncache(3))
	a, err := g.PrepareLoad([]GroupLoad{{Node: path[0], Group: 0, Dst: 5}})
	require.NoError(t, err)
	b, err := g.PrepareLoad([]GroupLoad{{Node: path[0], Group: 0, Dst: 6}})
	require.NoError(t, err)
	g.TakePlans(plans[:0])
	_, _, err = g.CompleteTransfer(a, false, nil)
	require.NoError(t, err)
	require.Equal(t, Device, g.LowerTier(path[0], 0))
	require.Zero(t, g.HoldInFlight(h), "a failed load's slot is leaving, not receiving a copy")
	_, _, err = g.CompleteTransfer(b, true, nil)
	require.NoError(t, err)
	require.NoError(t, g.CheckInvariants())
}

// TakePlans matches a tier's pending slots to its stores' sorted sources so that runs
// coalesce; a held slot keeps its (node, group), since the hold names the slot. Before,
// a hold's copy and another store prepared in the same step could swap slots: the hold
// then kept the other block, and its own was evicted to make room.
func TestGroupTreeTakePlansKeepsHeldSlots(t *testing.T) {
	g := newTestTree(t, 10, 2, 1)
	require.NoError(t, g.SetTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 2}}, BlockBytes: 100}))
	path := pathOf(g, RootNode, []int32{1, 2, 3, 4, 5, 6})
	require.NoError(t, g.Cache(5, path[0], 0))
	require.NoError(t, g.Cache(3, path[1], 0))
	require.NoError(t, g.Cache(4, path[2], 0))
	require.True(t, g.PrepareStore(5)) // slot 0, not held
	h, stored, err := g.Hold([]blocks.ID{3}, nil)
	require.NoError(t, err) // slot 1, held
	require.Equal(t, []blocks.ID{3}, stored)
	plans := g.TakePlans(nil)
	require.Len(t, plans, 1)
	_, _, err = g.CompleteTransfer(plans[0].ID, true, nil)
	require.NoError(t, err)
	require.NoError(t, g.CheckInvariants())
	require.True(t, g.PrepareStore(4), "the host evicts its candidate")
	require.Equal(t, Tier(1), g.LowerTier(path[1], 0), "the held block stays")
	require.Equal(t, Device, g.LowerTier(path[0], 0), "the other was the candidate")
	require.Equal(t, 1, g.HeldBlocks(h))
	require.NoError(t, g.CheckInvariants())
}
