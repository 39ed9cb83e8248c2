package hybrid

import (
	"fmt"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A swap-out whose store fails gives its blocks back to the free queue leaf first, as a
// finished sequence's, so that the next allocation evicts a leaf, never a parent whose
// child stays cached (a full-attention block below a parent no tier holds, its KV
// unreachable). Before, the sources went back at completion in the plan's order, by
// block ID: parent first (the first row failed: block 2 below its evicted parent). The
// StreamOrdered row is a control: its sources go back as TakePlans hands the store out,
// to the front as demoted blocks, and came out leaf first already. CheckInvariants does
// not see it (it stops checking the closure once a lower tier has failed a copy), so the
// test asks for the breaks themselves (ClosureBreaks).
func TestFailedSwapOutReleasesLeafFirst(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream-ordered ", stream), func(t *testing.T) {
			m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}, FullAttention{Block: 4}}, NumBlocks: 6,
				Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 4, Write: prefix.WriteBack}},
					BlockBytes: 16, StreamOrdered: stream}})
			require.NoError(t, err)
			_, err = m.AdmitTiered(0, &Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 1, 1}, MaxTokens: 14})
			require.NoError(t, err)
			_, err = m.PreemptSeq(0, blocktable.Swap) // its two blocks per group go to the host
			require.NoError(t, err)
			plans := m.TakePlans(nil)
			require.Len(t, plans, 1)
			if stream { // the sources are free now: an allocation takes one before the copy ends
				_, err = m.AdmitTiered(1, &Request{Prompt: []int32{1}, MaxTokens: 7})
				require.NoError(t, err)
			}
			_, err = m.CompleteTransfer(plans[0].ID, false)
			require.NoError(t, err)
			if !stream {
				_, err = m.AdmitTiered(1, &Request{Prompt: []int32{1}, MaxTokens: 7})
				require.NoError(t, err)
			}
			require.Empty(t, m.ClosureBreaks(), "no block cached below an evicted parent")
			require.NoError(t, m.CheckInvariants())
		})
	}
}

// A StreamOrdered store's device sources go back as TakePlans hands it out, before its
// copy is confirmed: leaf first too, so that if the copy fails the next allocation evicts
// the leaf. Before, a write-through store's sources went to the back in the plan's order
// (block 1, the parent, then block 2), and the allocation below evicted block 1, leaving
// block 2 cached below it (ClosureBreaks [2]).
func TestStreamOrderedStoreReleasesLeafFirst(t *testing.T) {
	m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}}, NumBlocks: 4,
		Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 4, Write: prefix.WriteThrough}},
			BlockBytes: 16, StreamOrdered: true}})
	require.NoError(t, err)
	_, err = m.AdmitTiered(0, &Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, MaxTokens: 9})
	require.NoError(t, err)
	require.NoError(t, m.Finish(0)) // blocks 1 and 2 (a parent and its child) held by their copies
	plans := m.TakePlans(nil)       // handed out: both go back to the free queue
	require.Len(t, plans, 1)
	_, err = m.CompleteTransfer(plans[0].ID, false)
	require.NoError(t, err)
	_, err = m.AdmitTiered(1, &Request{Prompt: []int32{9, 9, 9, 9, 9}, MaxTokens: 5}) // takes block 3 and one cached block
	require.NoError(t, err)
	require.Empty(t, m.ClosureBreaks(), "no block cached below an evicted parent")
	require.True(t, m.Block(blocks.ID(1)).Cached, "the parent stays, its child went first")
	require.NoError(t, m.CheckInvariants())
}

// A demotion whose copy fails leaves its block cached, ranked as used now at the back of
// the free queue, and its prefix goes with it (requeuePrefix), so that the queue stays
// leaf first. Before, block 2 went behind its parent, block 1 (the queue 4 3 1 2), and
// the allocation below evicted block 1 and left block 2 cached below it (ClosureBreaks
// [2]).
func TestFailedDemotionRequeuesItsPrefix(t *testing.T) {
	m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}}, NumBlocks: 5,
		Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 1, Write: prefix.WriteBack}},
			BlockBytes: 16, FreeTarget: 4}})
	require.NoError(t, err)
	_, err = m.AdmitTiered(0, &Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, MaxTokens: 9})
	require.NoError(t, err)
	require.NoError(t, m.Finish(0)) // blocks 1 and 2, a parent and its child, cached
	plans := m.TakePlans(nil)       // the host has room for one demotion: block 2's
	require.Len(t, plans, 1)
	require.Equal(t, []prefix.Run{{Src: 2, Dst: 0, Blocks: 1}}, plans[0].Runs)
	_, err = m.CompleteTransfer(plans[0].ID, false)
	require.NoError(t, err)
	_, err = m.AdmitTiered(1, &Request{Prompt: []int32{9, 9, 9, 9, 9, 9, 9, 9, 9}, MaxTokens: 9}) // three blocks
	require.NoError(t, err)
	require.Empty(t, m.ClosureBreaks(), "no block cached below an evicted parent")
	require.True(t, m.Block(blocks.ID(1)).Cached, "the parent stays, its child went first")
	require.NoError(t, m.CheckInvariants())
}
