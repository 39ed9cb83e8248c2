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
