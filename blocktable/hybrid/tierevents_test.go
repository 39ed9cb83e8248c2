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
