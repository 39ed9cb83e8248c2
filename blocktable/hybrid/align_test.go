package hybrid_test

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/stretchr/testify/require"
)

// vLLM's tests/v1/core/test_mamba_block_aligned_split.py, with its exact values (block
// size 16): the prefill chunk a scheduler computes next in Mamba align mode.
func TestAlignedChunkVLLM(t *testing.T) {
	for _, c := range []struct {
		name                           string
		tokens, computed, numNew, want int
		eagle                          bool
	}{
		{"already aligned", 20000, 0, 8192, 8192, false},
		{"rounds down", 1000, 0, 100, 96, false},
		{"exact block", 1000, 0, 16, 16, false},
		{"sub-block 1 kept", 20000, 8736, 1, 1, false},
		{"sub-block 5 kept", 20000, 8736, 5, 5, false},
		{"sub-block 8 kept", 20000, 8736, 8, 8, false},
		{"sub-block 15 kept", 20000, 8736, 15, 15, false},
		{"boundary 16", 20000, 8736, 16, 16, false},
		{"17 to 16", 20000, 8736, 17, 16, false},
		{"last chunk", 105, 100, 5, 5, false},
		{"force last cacheable chunk", 105, 80, 25, 16, false},
		{"decode", 100, 100, 1, 1, false},
		{"eagle shifts the last position", 105, 0, 100, 80, true},
		{"eagle sub-block 1", 20000, 8736, 1, 1, true},
		{"eagle sub-block 7", 20000, 8736, 7, 7, true},
		{"eagle sub-block 15", 20000, 8736, 15, 15, true},
		{"deadlock gap 15", 17500, 8736, 15, 15, false},
		{"deadlock gap 14", 17500, 8736, 14, 14, false},
		{"deadlock gap 1", 17500, 8736, 1, 1, false},
		{"progress after the gap", 17500, 8751, 8192, 8192, false},
		{"31", 20000, 8736, 31, 16, false},
		{"32", 20000, 8736, 32, 32, false},
		{"33", 20000, 8736, 33, 32, false},
		{"47", 20000, 8736, 47, 32, false},
		{"48", 20000, 8736, 48, 48, false},
		{"100", 20000, 8736, 100, 96, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, hybrid.AlignedChunk(c.tokens, c.tokens, c.computed, c.numNew, 16, c.eagle))
		})
	}
}

// Mamba align mode over full attention (blocks of 4 tokens), as vLLM's MambaManager: the
// Mamba group holds one running state block behind null entries, and for one step the
// state block before it; a prefill split on a block boundary (AlignedChunk) caches the
// state there, so a prompt sharing 8 tokens hits 8; one prefilled whole caches no state
// and the same prompt hits nothing.
func TestMambaAlignAllocation(t *testing.T) {
	m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
		hybrid.FullAttention{Block: 4}, hybrid.Mamba{Block: 4, Mode: hybrid.MambaAlign},
	}, NumBlocks: 20})
	require.NoError(t, err)
	prompt := seqTokens(10, 0)
	chunk := hybrid.AlignedChunk(10, 10, 0, 10, 4, false)
	require.Equal(t, 8, chunk)
	_, err = m.Admit(1, &hybrid.Request{Prompt: prompt, MaxTokens: 16, Prefill: chunk})
	require.NoError(t, err)
	require.Equal(t, [][]blocks.ID{{1, 2}, {0, 3}}, tables(t, m, 1), "the state after 8 tokens in block 3")
	require.Equal(t, 2, m.AlignedChunk(1, 100))
	require.NoError(t, m.Extend(1, 2))
	require.Equal(t, [][]blocks.ID{{1, 2, 4}, {0, 3, 5}}, tables(t, m, 1), "3 is the last state, 5 the running one")
	steps := []struct {
		tok  int32
		want [][]blocks.ID
	}{
		{10, [][]blocks.ID{{1, 2, 4}, {0, 0, 5}}},       // 3 released: the state moved on
		{11, [][]blocks.ID{{1, 2, 4}, {0, 0, 5}}},       // 12 tokens: 5 is full and cached
		{12, [][]blocks.ID{{1, 2, 4, 6}, {0, 0, 5, 7}}}, // a new running block
		{13, [][]blocks.ID{{1, 2, 4, 6}, {0, 0, 0, 7}}},
	}
	for _, st := range steps {
		require.NoError(t, m.Append(1, []int32{st.tok}))
		require.Equal(t, st.want, tables(t, m, 1), "after token %d", st.tok)
		require.NoError(t, m.CheckInvariants())
	}
	require.NoError(t, m.Finish(1))
	require.Equal(t, 12, m.Match(append(seqTokens(12, 0), 50, 51)), "the state after 12 tokens (block 5)")
	require.Equal(t, 8, m.Match(append(seqTokens(8, 0), 60, 61, 62)), "the state after 8 tokens (block 3)")
	hit, err := m.Admit(2, &hybrid.Request{Prompt: append(seqTokens(12, 0), 50, 51), MaxTokens: 16})
	require.NoError(t, err)
	require.Equal(t, 12, hit)
	require.Equal(t, [][]blocks.ID{{1, 2, 4, 8}, {0, 0, 5, 9}}, tables(t, m, 2), "the hit state, then a running block")
	require.NoError(t, m.Append(2, []int32{1}))
	require.Equal(t, [][]blocks.ID{{1, 2, 4, 8}, {0, 0, 0, 9}}, tables(t, m, 2), "the hit state is released once copied on")
	require.NoError(t, m.Finish(2))

	// The same prompt prefilled whole: its running block never fills before the prompt
	// ends, so no state is cached and a prompt sharing its first 8 tokens misses.
	m, err = hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
		hybrid.FullAttention{Block: 4}, hybrid.Mamba{Block: 4, Mode: hybrid.MambaAlign},
	}, NumBlocks: 20})
	require.NoError(t, err)
	_, err = m.Admit(1, &hybrid.Request{Prompt: prompt, MaxTokens: 16})
	require.NoError(t, err)
	require.Equal(t, [][]blocks.ID{{1, 2, 3}, {0, 0, 4}}, tables(t, m, 1))
	require.NoError(t, m.Finish(1))
	require.Zero(t, m.Match(append(seqTokens(8, 0), 60, 61, 62)))
	require.NoError(t, m.CheckInvariants())
}
