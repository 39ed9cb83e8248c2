package hybrid_test

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/stretchr/testify/require"
)

// Sparse retention (vLLM's prefix_cache_retention_interval) on a 40-token prompt of
// 4-token blocks. A 9-token window needs 2 blocks before a hit's end: with an interval of
// 16 tokens it keeps blocks 2 3, 6 7 (the runs before 16 and 32) and 7 8 (before the
// replay boundary 36); Mamba keeps the states ending on 16, 32 and 36 (blocks 3, 7, 8).
// The replay of the prompt hits 36 either way; a prompt sharing only its first 30 tokens
// falls back to the retained boundary 16 (dense retention: 28), or to nothing with
// interval 0. vLLM has no test with expected values for it; these follow its
// reachable_block_mask, and the state-machine test holds the Manager to a model of it.
func TestSparseRetention(t *testing.T) {
	prompt := seqTokens(40, 0)
	shared := append(seqTokens(30, 0), seqTokens(10, 5000)...)
	window := hybrid.SlidingWindow{Block: 4, Window: 9}
	mamba := hybrid.Mamba{Block: 4, Mode: hybrid.MambaAll}
	full := hybrid.FullAttention{Block: 4}
	for _, c := range []struct {
		name              string
		groups            []hybrid.Spec
		sparse, eagle     bool
		interval          int
		cached            []int // per group, after the first prompt
		replay, sharedHit int
	}{
		{"window dense", []hybrid.Spec{window}, false, false, 0, []int{10}, 36, 28},
		{"window every 16", []hybrid.Spec{window}, true, false, 16, []int{5}, 36, 16},
		{"window replay only", []hybrid.Spec{window}, true, false, 0, []int{2}, 36, 0},
		// EAGLE: 3 blocks a hit, shifted one block right: 2 3 4, 6 7 8, and 7 8 9.
		{"window every 16, eagle", []hybrid.Spec{window}, true, true, 16, []int{7}, 32, 16},
		{"mamba dense", []hybrid.Spec{full, mamba}, false, false, 0, []int{10, 10}, 36, 28},
		{"mamba every 16", []hybrid.Spec{full, mamba}, true, false, 16, []int{10, 3}, 36, 16},
		{"mamba replay only", []hybrid.Spec{full, mamba}, true, false, 0, []int{10, 1}, 36, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := hybrid.New(hybrid.Config{Groups: c.groups, NumBlocks: 64, Eagle: c.eagle,
				SparseRetention: c.sparse, RetentionInterval: c.interval})
			require.NoError(t, err)
			_, err = m.Admit(1, &hybrid.Request{Prompt: prompt, MaxTokens: 40})
			require.NoError(t, err)
			require.Equal(t, c.cached, m.Stats().Cached)
			require.NoError(t, m.Finish(1))
			require.Equal(t, c.replay, m.Match(prompt), "replay")
			require.Equal(t, c.sharedHit, m.Match(shared), "a prompt sharing 30 tokens")
			require.NoError(t, m.CheckInvariants())
		})
	}
}

// New refuses retention settings that would not mean what they say, with
// ErrInvalidArgument: an interval that is not a multiple of the block sizes' LCM, and an
// interval without SparseRetention (dense retention would ignore it silently), the latter
// also as ErrRetentionWithoutSparse.
func TestRetentionConfigRefused(t *testing.T) {
	window := hybrid.SlidingWindow{Block: 4, Window: 9}
	for _, c := range []struct {
		name     string
		sparse   bool
		interval int
		without  bool // ErrRetentionWithoutSparse
	}{
		{"not a multiple of the LCM", true, 6, false},
		{"negative", true, -4, false},
		{"interval without sparse retention", false, 16, true},
		{"negative without sparse retention", false, -4, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{window}, NumBlocks: 8,
				SparseRetention: c.sparse, RetentionInterval: c.interval})
			require.Nil(t, m)
			require.True(t, errors.Is(err, blocktable.ErrInvalidArgument), "%v", err)
			require.Equal(t, c.without, errors.Is(err, hybrid.ErrRetentionWithoutSparse), "%v", err)
		})
	}
	for _, sparse := range []bool{false, true} {
		_, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{window}, NumBlocks: 8, SparseRetention: sparse})
		require.NoError(t, err, "interval 0 is valid either way")
	}
}
