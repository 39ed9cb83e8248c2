package hybrid

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// freeOrder is the free queue, front (the next victim) first.
func freeOrder(m *Manager) []blocks.ID {
	var out []blocks.ID
	for b := range m.st.q.All() {
		out = append(out, b)
	}
	return out
}

// A store's source that goes to the free queue's back takes its waiting prefix behind it
// past a parent a copy still holds: the grandparent goes behind its grandchild, and the
// queue stays leaf first. Before, the walk stopped at the copy's block 2, leaving block 1
// ahead of block 3 (the queue 5 4 1 3); the allocation below evicted block 1, and once
// block 2's copy failed too, block 2 was cached below a parent no tier holds
// (ClosureBreaks [2]).
func TestRequeuePrefixPassesACopyHeldParent(t *testing.T) {
	m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}}, NumBlocks: 6,
		Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 8, Write: prefix.WriteThrough}},
			BlockBytes: 16}})
	require.NoError(t, err)
	_, err = m.AdmitTiered(0, &Request{Prompt: []int32{1, 2, 3, 4, 5}, MaxTokens: 20})
	require.NoError(t, err)
	var stores [3]prefix.TransferID // block i+1's write-through copy, each in a plan of its own
	for i := range stores {
		plans := m.TakePlans(nil)
		require.Len(t, plans, 1)
		require.Equal(t, []prefix.Run{{Src: int32(i + 1), Dst: int32(i), Blocks: 1}}, plans[0].Runs)
		stores[i] = plans[0].ID
		if i < 2 {
			require.NoError(t, m.Append(0, []int32{9, 9, 9, 9})) // the next block fills
		}
	}
	_, err = m.CompleteTransfer(stores[0], false) // block 1: no copy below
	require.NoError(t, err)
	require.NoError(t, m.Finish(0)) // blocks 4 and 1 to the queue; 2 and 3 held by their copies
	require.Equal(t, []blocks.ID{5, 4, 1}, freeOrder(m))
	_, err = m.CompleteTransfer(stores[2], true) // block 3 back, block 2 still copying
	require.NoError(t, err)
	require.Equal(t, []blocks.ID{5, 4, 3, 1}, freeOrder(m), "leaf first past the copy's block 2")

	_, err = m.AdmitTiered(1, &Request{Prompt: []int32{7, 7, 7, 7, 7, 7, 7, 7, 7}, MaxTokens: 9}) // takes 5, 4, 3
	require.NoError(t, err)
	_, err = m.CompleteTransfer(stores[1], false) // block 2 back, with no copy below
	require.NoError(t, err)
	require.True(t, m.Block(1).Cached, "the grandparent outlived its grandchild")
	require.Empty(t, m.ClosureBreaks())
	require.NoError(t, m.CheckInvariants())
}

// A sliding window's block whose store completes after the window released it goes to
// the free queue's back alone, as vLLM frees a window's block: the window's earlier
// blocks keep the places their release gave them (oldest first), since no hit needs a
// window block's prefix kept behind it (a window hit reads only the blocks inside it, and
// CheckInvariants keeps no closure for it). Before, requeuePrefix walked the window's
// chain too and moved every earlier block that waited (4, then 3) behind block 6, ranked
// as used now: the queue 13 14 15 6 4 3, where vLLM's is 13 14 15 3 4 6.
func TestRequeuePrefixLeavesAWindowsBlocksInPlace(t *testing.T) {
	m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}, SlidingWindow{Block: 4, Window: 4}}, NumBlocks: 16,
		Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 32, Write: prefix.WriteThrough}},
			BlockBytes: 16}})
	require.NoError(t, err)
	_, err = m.AdmitTiered(0, &Request{Prompt: []int32{1, 2, 3, 4, 5}, MaxTokens: 40})
	require.NoError(t, err)
	var last prefix.Plan
	for i := range 3 { // a block of each group fills each step; the window releases its older ones
		plans := m.TakePlans(nil)
		require.Len(t, plans, 1)
		if last = plans[0]; i < 2 {
			_, err = m.CompleteTransfer(last.ID, true)
			require.NoError(t, err)
		}
		require.NoError(t, m.Append(0, []int32{9, 9, 9, 9}))
	}
	require.Equal(t, []prefix.Run{{Src: 5, Dst: 4, Blocks: 2}}, last.Runs, "full attention's block 5, the window's block 6")
	require.NoError(t, m.Append(0, []int32{9, 9, 9, 9})) // the window releases block 6, its copy still running
	require.Equal(t, []blocks.ID{13, 14, 15, 3, 4}, freeOrder(m), "the window's blocks 3 and 4, oldest first")
	require.Equal(t, 1, m.Block(6).Group)
	_, err = m.CompleteTransfer(last.ID, true)
	require.NoError(t, err)
	require.Equal(t, []blocks.ID{13, 14, 15, 3, 4, 6}, freeOrder(m))
	require.NoError(t, m.CheckInvariants())
}

// A full-attention group whose block spans several match units (MatchUnit 4, blocks of
// 8) keeps its queue leaf first too: a failed demotion's block takes its parent block,
// two nodes up, behind it. Before, the walk looked one node up, found no block of the
// group at the unit between, and stopped: the queue 4 3 1 2, and the allocation below
// evicted the parent, block 1, leaving block 2 cached below it, unreachable.
func TestRequeuePrefixWalksBlocksOfSeveralUnits(t *testing.T) {
	m, err := New(Config{Groups: []Spec{FullAttention{Block: 8}}, NumBlocks: 5, MatchUnit: 4,
		Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 1, Write: prefix.WriteBack}},
			BlockBytes: 16, FreeTarget: 4}})
	require.NoError(t, err)
	_, err = m.AdmitTiered(0, &Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, MaxTokens: 17})
	require.NoError(t, err)
	require.NoError(t, m.Finish(0)) // blocks 1 and 2, a parent and its child, cached
	plans := m.TakePlans(nil)       // the host has room for one demotion: block 2's
	require.Len(t, plans, 1)
	require.Equal(t, []prefix.Run{{Src: 2, Dst: 0, Blocks: 1}}, plans[0].Runs)
	_, err = m.CompleteTransfer(plans[0].ID, false)
	require.NoError(t, err)
	require.Equal(t, []blocks.ID{4, 3, 2, 1}, freeOrder(m))
	_, err = m.AdmitTiered(1, &Request{Prompt: []int32{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}, MaxTokens: 17}) // three blocks
	require.NoError(t, err)
	require.True(t, m.Block(1).Cached, "the parent stays, its child went first")
	require.False(t, m.Block(2).Cached)
	require.NoError(t, m.CheckInvariants())
}

// A stream-ordered demotion's sources go to the free queue's front root first, so that
// the allocations evict the child before its parent, for a group whose blocks span
// several match units too: leafFirst finds a block's parent block two nodes up. Before,
// it looked one node up, found none and kept the plan's order, by ID: the queue 1 2 4 3,
// and the allocation below evicted block 1, the parent, leaving block 2 cached below it.
func TestLeafFirstWalksBlocksOfSeveralUnits(t *testing.T) {
	m, err := New(Config{Groups: []Spec{FullAttention{Block: 8}}, NumBlocks: 5, MatchUnit: 4,
		Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 2, Write: prefix.WriteBack}},
			BlockBytes: 16, FreeTarget: 4, StreamOrdered: true}})
	require.NoError(t, err)
	_, err = m.AdmitTiered(0, &Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, MaxTokens: 17})
	require.NoError(t, err)
	require.NoError(t, m.Finish(0))
	plans := m.TakePlans(nil) // both demoted, handed out: kept cached at the front
	require.Len(t, plans, 1)
	require.Equal(t, []prefix.Run{{Src: 1, Dst: 0, Blocks: 2}}, plans[0].Runs)
	require.Equal(t, []blocks.ID{2, 1, 4, 3}, freeOrder(m), "the child first")
	_, err = m.AdmitTiered(1, &Request{Prompt: []int32{9}, MaxTokens: 1}) // one block
	require.NoError(t, err)
	require.True(t, m.Block(1).Cached, "the parent stays, its child went first")
	require.False(t, m.Block(2).Cached)
	require.NoError(t, m.CheckInvariants())
}
