package hybrid_test

import (
	"testing"

	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A failed demotion leaves its blocks cached, at the free queue's tail as any block freed
// now (vLLM frees a store's source blocks when its job finishes, whatever the outcome):
// the next allocation takes the uncached free blocks first, not the failed copies' KV.
func TestHybridTierFailedDemotionGoesToTail(t *testing.T) {
	m := tiered(t, prefix.TierSpec{Capacity: 32, Write: prefix.WriteBack}, 12)
	p1 := seqTokens(17, 0)
	_, err := m.Admit(1, &hybrid.Request{Prompt: p1, MaxTokens: 20})
	require.NoError(t, err)
	require.NoError(t, m.Finish(1))
	plans := m.TakePlans(nil)
	require.Len(t, plans, 1)
	require.Equal(t, 8, plans[0].Blocks, "the 8 cached blocks are demoted ahead of need")
	_, err = m.CompleteTransfer(plans[0].ID, false)
	require.NoError(t, err)
	require.NoError(t, m.CheckInvariants())
	require.Equal(t, 16, m.Match(p1), "a failed copy leaves the device's KV cached")
	require.Zero(t, m.TierStats(prefix.Device).Pending)

	// 4 new blocks (2 per group): the 4 uncached free blocks, ahead of p1's in the queue.
	_, err = m.Admit(2, &hybrid.Request{Prompt: seqTokens(5, 1000), MaxTokens: 8})
	require.NoError(t, err)
	require.Equal(t, 16, m.Match(p1), "p1's blocks were not the allocation's victims")
	require.NoError(t, m.CheckInvariants())
}
