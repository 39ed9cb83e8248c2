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
// [2]). Under StreamOrdered the demoted block went to the queue's front, kept cached, as
// TakePlans handed its store out, and its failed store sent it to the back alone
// (settleKept), with the same break (the stream-ordered row failed before).
func TestFailedDemotionRequeuesItsPrefix(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream-ordered ", stream), func(t *testing.T) {
			m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}}, NumBlocks: 5,
				Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 1, Write: prefix.WriteBack}},
					BlockBytes: 16, FreeTarget: 4, StreamOrdered: stream}})
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
		})
	}
}

// A store completed ok gives its device sources back leaf first too, as releaseAll gives
// a finished table's, so that eviction in queue order takes the leaf before its parent.
// With a copy below each source the closure holds either way at first, but a lower tier
// may drop those copies later (its policy's eviction, a move down): the parent evicted
// first then leaves its child cached below a parent no tier holds (the tier machine's
// closure check found it: a write-through host dropped the child's and grandchild's
// copies, and the next allocations evicted the parent first). Before, the sources went
// back in the plan's order, by block ID: the queue 3 1 2, and the allocation below
// evicted block 1, the parent.
func TestCompletedStoreReleasesLeafFirst(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream-ordered ", stream), func(t *testing.T) {
			m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}}, NumBlocks: 4,
				Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 4, Write: prefix.WriteThrough}},
					BlockBytes: 16, StreamOrdered: stream}})
			require.NoError(t, err)
			_, err = m.AdmitTiered(0, &Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, MaxTokens: 9})
			require.NoError(t, err)
			require.NoError(t, m.Finish(0)) // blocks 1 and 2 (a parent and its child) held by their copies
			plans := m.TakePlans(nil)
			require.Len(t, plans, 1)
			require.Equal(t, []prefix.Run{{Src: 1, Dst: 0, Blocks: 2}}, plans[0].Runs)
			_, err = m.CompleteTransfer(plans[0].ID, true)
			require.NoError(t, err)
			_, err = m.AdmitTiered(1, &Request{Prompt: []int32{9, 9, 9, 9, 9}, MaxTokens: 5}) // takes block 3 and one cached block
			require.NoError(t, err)
			require.True(t, m.Block(blocks.ID(1)).Cached, "the parent stays, its child went first")
			require.False(t, m.Block(blocks.ID(2)).Cached, "the child went first")
			require.Empty(t, m.ClosureBreaks())
			require.NoError(t, m.CheckInvariants())
		})
	}
}

// A write-through store that fails leaves its source cached, ranked as used now at the
// back of the free queue, and its waiting prefix goes with it (requeuePrefix), as a
// failed demotion's does. Before, block 3 went behind its parent and grandparent (the
// queue 2 1 3), the allocation below evicted both and left block 3 cached below a parent
// no tier holds (ClosureBreaks [3]; the tier machine's closure check found it). Under
// StreamOrdered block 3 went back alone as TakePlans handed its store out, before the
// copy's outcome was known (the stream-ordered row failed before the source of every
// store took its prefix behind it).
func TestFailedWriteThroughRequeuesItsPrefix(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream-ordered ", stream), func(t *testing.T) {
			m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}}, NumBlocks: 4,
				Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 1, Write: prefix.WriteThrough}},
					BlockBytes: 16, StreamOrdered: stream}})
			require.NoError(t, err)
			_, err = m.AdmitTiered(0, &Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, MaxTokens: 17})
			require.NoError(t, err)
			fail := func() { // the host has room for one copy
				plans := m.TakePlans(nil)
				require.Len(t, plans, 1)
				_, err := m.CompleteTransfer(plans[0].ID, false)
				require.NoError(t, err)
			}
			fail()                                                                            // block 1's copy
			require.NoError(t, m.Append(0, []int32{12}))                                      // block 3 fills: cached, its copy prepared
			require.NoError(t, m.Finish(0))                                                   // blocks 2 and 1 to the queue; 3 held by its copy
			fail()                                                                            // block 3's copy
			_, err = m.AdmitTiered(1, &Request{Prompt: []int32{9, 9, 9, 9, 9}, MaxTokens: 5}) // two cached blocks
			require.NoError(t, err)
			require.Empty(t, m.ClosureBreaks(), "no block cached below an evicted parent")
			require.True(t, m.Block(blocks.ID(1)).Cached, "the root stays, its descendants went first")
			require.NoError(t, m.CheckInvariants())
		})
	}
}
