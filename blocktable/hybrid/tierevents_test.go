package hybrid

import (
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// mediumRec counts the events and their blocks per medium and group.
type mediumRec struct{ stored, storedBlocks, removed, removedBlocks map[string]int }

func newMediumRec() *mediumRec {
	return &mediumRec{map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}}
}

func (r *mediumRec) BlockStored(e *prefix.BlockStored) {
	r.stored[e.Medium]++
	r.storedBlocks[e.Medium] += len(e.Blocks)
}

func (r *mediumRec) BlockRemoved(e *prefix.BlockRemoved) {
	r.removed[e.Medium]++
	r.removedBlocks[e.Medium] += len(e.Blocks)
}

func (r *mediumRec) AllBlocksCleared() {}

// A sequence swapped into the host reports its chain there in one BlockStored per group
// (not one per block), and a second swap that makes room (once the first has finished,
// releasing its hold) drops the host's victims in one BlockRemoved per group.
func TestTierEventsBatchPerChain(t *testing.T) {
	rec := newMediumRec()
	m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}, SlidingWindow{Block: 4, Window: 32}}, NumBlocks: 32, Observer: rec,
		Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 8, Write: prefix.WriteBack}}, BlockBytes: 64}})
	require.NoError(t, err)
	swap := func(id blocktable.SeqID, base int32) {
		_, err := m.Admit(id, &Request{Prompt: toks(base, 17), MaxTokens: 17})
		require.NoError(t, err)
		_, err = m.PreemptSeq(id, blocktable.Swap)
		require.NoError(t, err)
		for _, p := range m.TakePlans(nil) {
			_, err := m.CompleteTransfer(p.ID, true)
			require.NoError(t, err)
		}
	}
	swap(1, 0)
	require.Equal(t, 8, rec.storedBlocks[prefix.MediumCPU], "4 blocks of each group")
	require.Equal(t, 2, rec.stored[prefix.MediumCPU], "one event per group's chain")
	require.NoError(t, m.Finish(1)) // its hold released: its host copies may make room
	swap(2, 1000)
	require.Equal(t, 8, rec.removedBlocks[prefix.MediumCPU], "the first sequence's blocks make room")
	require.Equal(t, 2, rec.removed[prefix.MediumCPU], "one event per group")
	require.Equal(t, 4, rec.stored[prefix.MediumCPU])
	require.NoError(t, m.CheckInvariants())
}

// Every block stored in a tier is reported, also when the batch holds a branching
// prefix: one prefix stored with two continuations, each continuing twice. The chain
// found from a block's head followed the first continuation and passed the block by, and
// the block was never reported (the events held 9 of the host's 10 blocks here).
func TestTierEventsBranchingBatch(t *testing.T) {
	rec := newMediumRec()
	m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}, FullAttention{Block: 4}}, NumBlocks: 12, Observer: rec,
		Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 10, Write: prefix.WriteThrough}}, BlockBytes: 16}})
	require.NoError(t, err)
	b := toks(1, 12)
	// The sources' order (the block IDs the admissions get) decides the order the copies
	// complete in, and so which continuation a chain follows first.
	admit := func(id blocktable.SeqID, p []int32) {
		_, err := m.Admit(id, &Request{Prompt: p, MaxTokens: len(p) + 6})
		require.NoError(t, err)
	}
	admit(0, []int32{1})
	admit(1, []int32{1})
	admit(2, []int32{1, 2, 3, 4, 9, 9, 9, 9})
	require.NoError(t, m.Finish(0))
	admit(3, append(append([]int32(nil), b[:11]...), 1))
	require.NoError(t, m.Finish(1))
	admit(4, b)
	plans := m.TakePlans(nil)
	require.Len(t, plans, 1, "the ten write-through copies")
	_, err = m.CompleteTransfer(plans[0].ID, true)
	require.NoError(t, err)
	require.Equal(t, 10, m.TierStats(1).Resident)
	require.Equal(t, 10, rec.storedBlocks[prefix.MediumCPU], "every stored block reported")
	require.NoError(t, m.CheckInvariants())
}
