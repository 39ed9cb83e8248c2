package hybrid

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix"
)

// explainOf runs Explain on prompt, checks it agrees with MatchRequest, and returns it.
func explainOf(t *testing.T, m *Manager, prompt []int32) (int, prefix.Explanation) {
	t.Helper()
	var e prefix.Explanation
	req := &Request{Prompt: prompt, MaxTokens: len(prompt)}
	hit, err := m.Explain(req, &e)
	require.NoError(t, err)
	match, err := m.MatchRequest(req)
	require.NoError(t, err)
	require.Equal(t, match, hit, "Explain's hit is MatchRequest's")
	require.Equal(t, hit/m.unit, e.MatchedBlocks)
	require.Equal(t, len(prompt)/m.unit, e.FullBlocks)
	return hit, e
}

func toks(base int32, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = base + int32(i)
	}
	return out
}

// windowConfig is full attention and a window of two 4-token blocks.
func windowConfig(numBlocks int) Config {
	return Config{Groups: []Spec{FullAttention{Block: 4}, SlidingWindow{Block: 4, Window: 8}}, NumBlocks: numBlocks}
}

// Each of the hybrid miss reasons, produced by the state that causes it.
func TestExplainHybridReasons(t *testing.T) {
	p := toks(1, 16) // four blocks

	t.Run("full attention's reasons", func(t *testing.T) {
		m, err := New(windowConfig(32))
		require.NoError(t, err)
		hit, e := explainOf(t, m, p)
		require.Zero(t, hit)
		require.Equal(t, prefix.MissNeverStored, e.Reason)
		admitAll(t, m, 1, p)
		require.NoError(t, m.Finish(1))

		hit, e = explainOf(t, m, p)
		require.Equal(t, 12, hit)
		require.Equal(t, prefix.MissCapped, e.Reason, "the fourth block is cached; len - 1 left it out")
		hit, e = explainOf(t, m, append(append([]int32(nil), p...), 99))
		require.Equal(t, 16, hit)
		require.Equal(t, prefix.MissNone, e.Reason)
		_, e = explainOf(t, m, append(append([]int32(nil), p[:8]...), toks(500, 8)...))
		require.Equal(t, prefix.MissNeverStored, e.Reason)
	})

	t.Run("a group without its block: MissGroup", func(t *testing.T) {
		m, err := New(windowConfig(32))
		require.NoError(t, err)
		tables := admitAll(t, m, 1, p)
		require.NoError(t, m.Finish(1))
		m.EvictBlocks(tables[1][3:4]) // the window's last block, dropped with no cause
		hit, e := explainOf(t, m, append(append([]int32(nil), p...), 99))
		require.Equal(t, 12, hit, "the window serves blocks 1 and 2, full attention all four")
		require.Equal(t, prefix.MissGroup, e.Reason)
		require.Equal(t, 1, e.Group, "the sliding-window group lowered the fixed point")
	})

	t.Run("a window block released mid-sequence and evicted: EvictWindow", func(t *testing.T) {
		// Exactly the blocks of one sequence: its first decode step releases the window's
		// blocks 0 and 1 and its allocation for the new block evicts them.
		m, err := New(windowConfig(1 + 8))
		require.NoError(t, err)
		_, err = m.Admit(1, &Request{Prompt: p, MaxTokens: 24})
		require.NoError(t, err)
		require.NoError(t, m.Append(1, []int32{77}))
		require.Equal(t, uint64(2), m.Stats().Evictions)
		hit, e := explainOf(t, m, append(append([]int32(nil), p[:12]...), 99))
		require.Zero(t, hit, "full attention has three blocks, the window none before block 2")
		require.Equal(t, prefix.MissEvicted, e.Reason)
		require.Equal(t, prefix.EvictWindow, e.Evicted)
		require.Equal(t, 1, e.Group)
	})

	t.Run("a block sparse retention never kept: MissSparseGap", func(t *testing.T) {
		cfg := windowConfig(64)
		cfg.SparseRetention, cfg.RetentionInterval = true, 16
		m, err := New(cfg)
		require.NoError(t, err)
		long := toks(1, 32)
		admitAll(t, m, 1, long)
		require.NoError(t, m.Finish(1))
		hit, e := explainOf(t, m, append(append([]int32(nil), long[:20]...), 99))
		require.Less(t, hit, 20, "the window lacks block 4, between retained boundaries")
		require.Equal(t, prefix.MissSparseGap, e.Reason)
		require.Equal(t, 1, e.Group)
	})

	t.Run("EAGLE", func(t *testing.T) {
		cfg := windowConfig(32)
		cfg.Eagle = true
		m, err := New(cfg)
		require.NoError(t, err)
		admitAll(t, m, 1, p)
		require.NoError(t, m.Finish(1))
		_, e := explainOf(t, m, append(append([]int32(nil), p...), 99))
		require.Equal(t, prefix.MissEAGLE, e.Reason)
	})
}

// Explain allocates nothing once the Manager has a spare sequence.
func TestExplainHybridAllocatesNothing(t *testing.T) {
	m, err := New(windowConfig(32))
	require.NoError(t, err)
	p := toks(1, 16)
	tables := admitAll(t, m, 1, p)
	require.NoError(t, m.Finish(1))
	m.EvictBlocks(tables[1][3:4])
	req := &Request{Prompt: append(append([]int32(nil), p...), 99), MaxTokens: 17}
	var e prefix.Explanation
	_, err = m.Explain(req, &e)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() { _, _ = m.Explain(req, &e) })
	require.Zero(t, allocs)
	require.Equal(t, prefix.MissGroup, e.Reason)
}

// A window block released mid-sequence and then hit again is an ordinary block once more:
// evicted after its second holder finished, its eviction is the policy's.
func TestExplainHybridWindowMarkClearedByAHit(t *testing.T) {
	m, err := New(windowConfig(32))
	require.NoError(t, err)
	p := toks(1, 16)
	_, err = m.Admit(1, &Request{Prompt: p, MaxTokens: 24})
	require.NoError(t, err)
	require.NoError(t, m.Append(1, []int32{77})) // releases the window's blocks 0 and 1
	q := append(append([]int32(nil), p[:12]...), 99)
	hit, err := m.Admit(2, &Request{Prompt: q, MaxTokens: len(q)})
	require.NoError(t, err)
	require.Equal(t, 12, hit, "the hit takes the window's block 1 back from the queue")
	require.NoError(t, m.Finish(2))
	// C fills the pool; its first decode step's allocation evicts the window's block 1.
	c := toks(900, 44)
	_, err = m.Admit(3, &Request{Prompt: c, MaxTokens: 48})
	require.NoError(t, err)
	require.NoError(t, m.Append(3, []int32{5}))
	hit, e := explainOf(t, m, q)
	require.Zero(t, hit)
	require.Equal(t, prefix.MissEvicted, e.Reason)
	require.Equal(t, prefix.EvictPolicy, e.Evicted, "the hit cleared the window's mark")
	require.Equal(t, 1, e.Group)
	require.NoError(t, m.CheckInvariants())
}
