package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// A refused Hold says how many of tier 1's slots copies in flight occupy (InFlight), so
// that a caller can tell a refusal worth retrying once the server confirms its transfers
// from a tier full of held copies. A write-through host of two slots receives the copies
// of prompt A (in flight): a Hold of B's two blocks is refused with InFlight 2, and
// succeeds once the copies land (candidates then). Held instead, A's slots leave no room
// and none in flight: InFlight 0, and only ReleaseHold makes room.
func TestTierFullErrorCountsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name     string
		holdA    bool
		inFlight int
		retryOK  bool
	}{
		{"copies in flight", false, 2, true},
		{"held copies", true, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, x := newTestIndex(t, 9, WithTiers(TierConfig{
				Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 2, Write: WriteThrough}}, BlockBytes: 1,
			}))
			a := admit(t, x, pool, Prompt{Tokens: toks(100, 9)}) // two full blocks: their copies prepared
			if tc.holdA {
				_, err := x.Hold(a.ids[:2])
				require.NoError(t, err)
				completeAll(t, x, x.TakePlans(nil), true)
			}
			b := admit(t, x, pool, Prompt{Tokens: toks(500, 9)})
			plans := x.TakePlans(nil) // B's own copies find no room; A's are in flight unless held
			require.Equal(t, tc.inFlight, x.InFlightSlots(1))
			require.Zero(t, x.InFlightSlots(0), "no tier 0 below the device")
			require.Zero(t, x.InFlightSlots(2), "a tier the index lacks")
			_, err := x.Hold(b.ids[:2])
			var full *TierFullError
			require.ErrorAs(t, err, &full)
			require.Equal(t, TierFullError{Requested: 2, Available: 0, InFlight: tc.inFlight}, *full)
			require.ErrorIs(t, err, ErrTierFull)
			completeAll(t, x, plans, true)
			require.Zero(t, x.InFlightSlots(1), "every copy landed")
			_, err = x.Hold(b.ids[:2])
			if tc.retryOK {
				require.NoError(t, err, "the retry found the landed copies evictable")
			} else {
				require.ErrorIs(t, err, ErrTierFull)
			}
			require.NoError(t, x.CheckInvariants())
		})
	}
	_, plain := newTestIndex(t, 4)
	require.Zero(t, plain.InFlightSlots(1), "no tiers")
}

// A GroupTree's refused Hold counts its tier-1 slots in flight the same way: a slot
// receiving a store, and a resident one a load reads; a held slot is never in flight.
func TestGroupTreeTierFullErrorCountsInFlight(t *testing.T) {
	g := newTieredTree(t, 10, TierSpec{Medium: MediumCPU, Capacity: 2})
	path := pathOf(g, RootNode, []int32{1, 2, 3, 4, 5, 6})
	require.NoError(t, g.Cache(1, path[0], 0))
	require.True(t, g.PrepareStore(1)) // in flight into its slot
	require.Equal(t, 1, g.inFlightSlots(1))
	done := func() {
		t.Helper()
		for _, p := range g.TakePlans(nil) {
			_, _, err := g.CompleteTransfer(p.ID, true, nil)
			require.NoError(t, err)
		}
	}
	done()
	require.Zero(t, g.inFlightSlots(1), "resident, read by nothing")
	require.NoError(t, g.Uncache(1))
	_, err := g.PrepareLoad([]GroupLoad{{Node: path[0], Group: 0, Dst: 2}}) // the load pins its slot
	require.NoError(t, err)
	require.Equal(t, 1, g.inFlightSlots(1))
	require.NoError(t, g.Cache(3, path[1], 0))
	require.NoError(t, g.Cache(4, path[2], 0))
	require.True(t, g.PrepareStore(3)) // the second slot, in flight too
	require.NoError(t, g.Cache(5, path[2], 1))
	_, _, err = g.Hold([]blocks.ID{4, 5}, nil)
	var full *TierFullError
	require.ErrorAs(t, err, &full)
	require.Equal(t, TierFullError{Requested: 2, Available: 0, InFlight: 2}, *full)
	done()
	require.Zero(t, g.inFlightSlots(1))
	h, _, err := g.Hold([]blocks.ID{3}, nil) // held, resident: no room, none in flight
	require.NoError(t, err)
	require.Zero(t, g.inFlightSlots(1))
	require.NoError(t, g.ReleaseHold(h))
	require.Zero(t, g.inFlightSlots(2), "a tier the tree lacks")
	require.Zero(t, newTestTree(t, 4, 2, 1).inFlightSlots(1), "no tiers")
	require.NoError(t, g.CheckInvariants())
}

// TierFullError's message names the slots in flight only when there are some.
func TestTierFullErrorMessage(t *testing.T) {
	require.Equal(t, "prefix: tier 1 has room for 1 of the 3 blocks to hold", (&TierFullError{Requested: 3, Available: 1}).Error())
	require.Equal(t, "prefix: tier 1 has room for 1 of the 3 blocks to hold (2 more slots held by copies in flight)",
		(&TierFullError{Requested: 3, Available: 1, InFlight: 2}).Error())
}
