package hybrid

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// WriteAfterHits counts a block's computation as its first use, as an Index counts a
// node's hits (1 at its commit): with Hits 2 a block is copied down at its first hit on
// the device, and with Hits 1 as it is cached. Both managers run the same prompt three
// times, and the test compares the admission at which each plans its store. Before, the
// hybrid Manager counted the device hits alone: Hits 1 stored at the commit but Hits 2
// only at the second hit, one admission after the Index.
func TestWriteAfterHitsCountsTheComputation(t *testing.T) {
	prompt := []int32{1, 2, 3, 4, 5}
	spec := prefix.TierSpec{Medium: prefix.MediumCPU, Capacity: 8, Write: prefix.WriteAfterHits}
	for _, hits := range []uint32{1, 2, 3} {
		spec.Hits = hits
		cfg := prefix.TierConfig{Tiers: []prefix.TierSpec{spec}, BlockBytes: 16}

		m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}}, NumBlocks: 8, Tiers: &cfg})
		require.NoError(t, err)
		hybridAt := 0
		for run := 1; run <= 3 && hybridAt == 0; run++ {
			_, err := m.AdmitTiered(0, &Request{Prompt: prompt, MaxTokens: 5})
			require.NoError(t, err)
			if len(m.TakePlans(nil)) > 0 {
				hybridAt = run
			}
			require.NoError(t, m.Finish(0))
		}

		pool, err := blocks.New(8, blocks.WithNullBlock())
		require.NoError(t, err)
		index, err := prefix.New(pool, 4, prefix.WithTiers(cfg))
		require.NoError(t, err)
		bm, err := blocktable.New(blocktable.Config{Index: index})
		require.NoError(t, err)
		indexAt := 0
		for run := 1; run <= 3 && indexAt == 0; run++ {
			_, err := bm.Admit(0, &blocktable.Request{Prompt: prompt, MaxTokens: 5})
			require.NoError(t, err)
			if len(bm.TakePlans(nil)) > 0 {
				indexAt = run
			}
			require.NoError(t, bm.Finish(0))
		}

		require.Equal(t, int(hits), indexAt, "the Index stores at use %d", hits)
		require.Equal(t, indexAt, hybridAt, "Hits %d", hits)
	}
}
