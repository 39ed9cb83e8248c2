package hybrid_test

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// HitBlocks reads the device only, as its doc says: a prefix only the host holds (a
// swapped-out sequence's demoted blocks) gives the null block for every block of the
// hit MatchTiers reports to load, not the host's copies.
func TestHitBlocksDeviceOnly(t *testing.T) {
	m := tiered(t, prefix.TierSpec{Capacity: 32, Write: prefix.WriteBack}, 0)
	p := seqTokens(9, 100)
	_, err := m.Admit(2, &hybrid.Request{Prompt: p, MaxTokens: 12})
	require.NoError(t, err)
	_, err = m.PreemptSeq(2, blocktable.Swap)
	require.NoError(t, err)
	completeAll(t, m, true)
	require.NoError(t, m.Finish(2))
	hit, load, err := m.MatchTiers(&hybrid.Request{Prompt: p})
	require.NoError(t, err)
	require.Equal(t, [2]int{0, 8}, [2]int{hit, load}, "the host alone holds the prefix")
	null := []blocks.ID{blocks.NullID, blocks.NullID}
	require.Equal(t, [][]blocks.ID{null, null}, m.HitBlocks(p, hit+load))
	require.NoError(t, m.CheckInvariants())
}
