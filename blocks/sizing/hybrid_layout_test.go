package sizing

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The layout arithmetic on the published configs: vLLM's uniform pages raise attention's
// block to hold a state on Mamba hybrids and pad Gemma 3's groups; the other layouts keep
// 16-token blocks.
func TestCompareLayouts(t *testing.T) {
	byName := map[string]HybridModel{}
	for _, m := range HybridPresets() {
		byName[m.Name] = m
	}
	const gib = int64(1) << 30
	rows, err := CompareLayouts(byName["jamba-1.5-mini"], 8192, 8192, 40*gib)
	require.NoError(t, err)
	// 311,296-byte Mamba state over 4,096 bytes a token: 76 tokens, aligned up to 80.
	require.Equal(t, 80, rows[0].BlockTokens)
	require.Equal(t, 16, rows[1].BlockTokens)
	rows, err = CompareLayouts(byName["qwen3-next-80b-a3b"], 8192, 8192, 40*gib)
	require.NoError(t, err)
	// 1,097,728-byte DeltaNet state over 2,048 bytes a token: 536, aligned up to 544.
	require.Equal(t, 544, rows[0].BlockTokens)
	rows, err = CompareLayouts(byName["gemma-3-27b"], 8192, 8192, 40*gib)
	require.NoError(t, err)
	// 52 sliding layers in groups of 10: 6 groups, 8 padding slots.
	require.Equal(t, 8, rows[0].PaddingLayers)
	require.Greater(t, rows[0].RequestBytes, rows[2].RequestBytes)
	rows, err = CompareLayouts(byName["gpt-oss-120b"], 8192, 8192, 40*gib)
	require.NoError(t, err)
	require.Zero(t, rows[0].PaddingLayers)
	require.Equal(t, rows[0].RequestBytes, rows[2].RequestBytes, "no state, no padding: the layouts agree")
	// At the planning context the per-class pools hold what carved pages hold (within
	// rounding); at another length the split leaves one pool short.
	for _, m := range HybridPresets() {
		at, err := CompareLayouts(m, 8192, 8192, 40*gib)
		require.NoError(t, err)
		require.InDelta(t, at[2].Concurrency, at[1].Concurrency, 1, m.Name)
		off, err := CompareLayouts(m, 65536, 8192, 40*gib)
		require.NoError(t, err)
		require.LessOrEqual(t, off[1].Concurrency, off[2].Concurrency, m.Name)
		for _, r := range off {
			require.GreaterOrEqual(t, r.RequestBytes, r.UsefulBytes, "%s %s", m.Name, r.Layout)
		}
	}
	_, err = CompareLayouts(HybridModel{Name: "x"}, 1, 1, 1)
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// TestHybridLayoutTable prints the comparison bench/README.md shows.
func TestHybridLayoutTable(t *testing.T) {
	table, err := LayoutTable(HybridPresets(), []int64{2048, 32768}, 8192, 40<<30)
	require.NoError(t, err)
	t.Log("\n" + table)
}
