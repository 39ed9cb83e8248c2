package hybrid

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// Ports of vLLM's hybrid and EAGLE prefix-caching tests (tests/v1/core/
// test_prefix_caching.py at ff1b90a2), with vLLM's exact block IDs and hit lengths.
// vLLM's get_computed_blocks is Match plus HitBlocks here, allocate_slots is Admit, and
// popping a (hash, group) key out of the block map is EvictBlocks of the block under it.

// vllmTokens returns n blocks of bs tokens, block i holding i repeated (vLLM's
// common_token_ids), followed by tail.
func vllmTokens(n, bs int, tail ...int32) []int32 {
	out := make([]int32, 0, n*bs+len(tail))
	for i := range n {
		for range bs {
			out = append(out, int32(i))
		}
	}
	return append(out, tail...)
}

func repeat(v int32, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// hybridConfig is make_kv_cache_config_hybrid_model: full attention, then two groups of
// the second kind (a sliding window of swBlocks blocks, or Mamba).
func hybridConfig(bs, numBlocks, swBlocks int, eagle bool) Config {
	sw := SlidingWindow{Block: bs, Window: swBlocks * bs}
	return Config{Groups: []Spec{FullAttention{Block: bs}, sw, sw}, NumBlocks: numBlocks, Eagle: eagle}
}

func admitAll(t *testing.T, m *Manager, id blocktable.SeqID, prompt []int32) [][]blocks.ID {
	t.Helper()
	_, err := m.Admit(id, &Request{Prompt: prompt, MaxTokens: len(prompt) + 64})
	require.NoError(t, err)
	out := make([][]blocks.ID, m.ng)
	for g := range out {
		tb, err := m.Table(id, g)
		require.NoError(t, err)
		out[g] = append([]blocks.ID(nil), tb...)
	}
	return out
}

func ids(v ...blocks.ID) []blocks.ID { return v }

// partialHit is _test_partial_request_hit: on a manager in the state setup builds, drop
// the given blocks from the cache and require the hit (in blocks) of prompt.
func partialHit(t *testing.T, setup func() (*Manager, []int32), evict []blocks.ID, wantBlocks int) {
	t.Helper()
	m, prompt := setup()
	m.EvictBlocks(evict)
	hit := m.Match(prompt)
	require.Equal(t, wantBlocks*16, hit)
	for g, b := range m.HitBlocks(prompt, hit) {
		require.Len(t, b, hit/16, "group %d", g)
	}
	require.NoError(t, m.CheckInvariants())
}

// TestVLLMPrefillHybridModel is test_prefill_hybrid_model.
func TestVLLMPrefillHybridModel(t *testing.T) {
	const bs = 16
	common := vllmTokens(3, bs)
	setup := func() (*Manager, []int32) {
		m, err := New(hybridConfig(bs, 21, 2, false))
		require.NoError(t, err)
		p0 := append(append([]int32(nil), common...), repeat(3, 7)...)
		require.Zero(t, m.Match(p0))
		require.Equal(t, [][]blocks.ID{ids(1, 2, 3, 4), ids(5, 6, 7, 8), ids(9, 10, 11, 12)}, admitAll(t, m, 0, p0))
		// Full blocks are cached once per group, the partial ones not at all.
		for i, row := range [][]blocks.ID{ids(1, 5, 9), ids(2, 6, 10), ids(3, 7, 11)} {
			for g, b := range row {
				e, ok := m.st.t.Entry(b)
				require.True(t, ok, "block %d", b)
				require.Equal(t, g, e.Group)
				require.Equal(t, 1, m.st.ref(b))
				if i > 0 {
					prev, _ := m.st.t.Entry(row[0] - 1)
					require.Equal(t, prev.Node, m.st.t.Parent(e.Node), "block %d chains", b)
				}
			}
		}
		for _, b := range ids(4, 8, 12) {
			require.False(t, m.st.t.IsCached(b))
			require.Equal(t, 1, m.st.ref(b))
		}
		p1 := append(append([]int32(nil), common...), repeat(3, 5)...)
		hit := m.Match(p1)
		require.Equal(t, 3*bs, hit)
		require.Equal(t, [][]blocks.ID{ids(1, 2, 3), ids(0, 6, 7), ids(0, 10, 11)}, m.HitBlocks(p1, hit))
		require.Equal(t, [][]blocks.ID{ids(1, 2, 3, 13), ids(0, 6, 7, 14), ids(0, 10, 11, 15)}, admitAll(t, m, 1, p1))
		for _, b := range ids(1, 2, 3, 6, 7, 10, 11) {
			require.Equal(t, 2, m.st.ref(b))
		}
		require.NoError(t, m.Finish(0))
		require.NoError(t, m.Finish(1))
		require.NoError(t, m.CheckInvariants())
		return m, p1
	}
	// Blocks by (hash i, group g): full attention 1, 2, 3; the windows 5, 6, 7 and 9, 10, 11.
	t.Run("outside the window", func(t *testing.T) { partialHit(t, setup, ids(5, 9), 3) })
	t.Run("first full-attention block", func(t *testing.T) { partialHit(t, setup, ids(1), 0) })
	t.Run("last block of every group", func(t *testing.T) { partialHit(t, setup, ids(3, 7, 11), 2) })
	t.Run("last full-attention block", func(t *testing.T) { partialHit(t, setup, ids(3), 2) })
	t.Run("last block of window 1", func(t *testing.T) { partialHit(t, setup, ids(7), 2) })
	t.Run("last block of window 2", func(t *testing.T) { partialHit(t, setup, ids(11), 2) })
	t.Run("different lengths per kind", func(t *testing.T) { partialHit(t, setup, ids(3, 5, 9), 0) })
}

// TestVLLMPrefillHybridModelEagle is test_prefill_hybrid_model_eagle.
func TestVLLMPrefillHybridModelEagle(t *testing.T) {
	const bs = 16
	common := vllmTokens(6, bs)
	setup := func() (*Manager, []int32) {
		m, err := New(hybridConfig(bs, 31, 3, true))
		require.NoError(t, err)
		p0 := append(append([]int32(nil), common...), repeat(6, 7)...)
		require.Zero(t, m.Match(p0))
		require.Equal(t, [][]blocks.ID{
			ids(1, 2, 3, 4, 5, 6, 7), ids(8, 9, 10, 11, 12, 13, 14), ids(15, 16, 17, 18, 19, 20, 21),
		}, admitAll(t, m, 0, p0))
		for _, b := range ids(7, 14, 21) {
			require.False(t, m.st.t.IsCached(b))
		}
		p1 := append(append([]int32(nil), common...), repeat(6, 5)...)
		hit := m.Match(p1)
		require.Equal(t, 4*bs, hit)
		require.Equal(t, [][]blocks.ID{ids(1, 2, 3, 4), ids(0, 9, 10, 11), ids(0, 16, 17, 18)}, m.HitBlocks(p1, hit))
		require.Equal(t, [][]blocks.ID{
			ids(1, 2, 3, 4, 22, 23, 24), ids(0, 9, 10, 11, 25, 26, 27), ids(0, 16, 17, 18, 28, 29, 30),
		}, admitAll(t, m, 1, p1))
		for _, b := range ids(1, 2, 3, 4, 9, 10, 11, 16, 17, 18) {
			require.Equal(t, 2, m.st.ref(b))
		}
		require.NoError(t, m.Finish(0))
		require.NoError(t, m.Finish(1))
		return m, p1
	}
	// vLLM pops whole keys. Hash 0 is blocks 1, 8, 15. Request 1 cached its blocks 4 and 5
	// again beside request 0's, so hash 4 (second last) is 5+22, 12+25, 19+28 and hash 5
	// (last) 6+23, 13+26, 20+29.
	t.Run("outside the window", func(t *testing.T) { partialHit(t, setup, ids(8, 15), 4) })
	t.Run("first full-attention block", func(t *testing.T) { partialHit(t, setup, ids(1), 0) })
	t.Run("last block of every group", func(t *testing.T) { partialHit(t, setup, ids(6, 23, 13, 26, 20, 29), 3) })
	t.Run("last full-attention block", func(t *testing.T) { partialHit(t, setup, ids(6, 23), 3) })
	t.Run("second last of window 1", func(t *testing.T) { partialHit(t, setup, ids(12, 25), 3) })
	t.Run("second last of window 2", func(t *testing.T) { partialHit(t, setup, ids(19, 28), 3) })
	t.Run("different lengths per kind", func(t *testing.T) { partialHit(t, setup, ids(6, 23, 8, 15), 0) })
}

// specFor is _make_hybrid_kv_cache_config's spec map.
func specFor(kind string, bs int) Spec {
	switch kind {
	case "full":
		return FullAttention{Block: bs}
	case "sliding_window":
		return SlidingWindow{Block: bs, Window: 2 * bs}
	case "sliding_window_large":
		return SlidingWindow{Block: bs, Window: 4 * bs}
	case "mamba":
		return Mamba{Block: bs, Mode: MambaNone}
	}
	panic(kind)
}

// TestVLLMPrefillHybridModelCombinations is test_prefill_hybrid_model_combinations.
func TestVLLMPrefillHybridModelCombinations(t *testing.T) {
	const bs = 16
	for _, kinds := range [][]string{
		{"full", "sliding_window"},
		{"full", "mamba"},
		{"sliding_window", "mamba"},
		{"sliding_window", "sliding_window_large"},
		{"full", "sliding_window", "sliding_window"},
		{"full", "mamba", "mamba"},
		{"full", "sliding_window", "mamba"},
		{"full", "sliding_window", "sliding_window_large"},
		{"full", "full", "sliding_window"},
		{"full", "full", "mamba"},
		{"full", "sliding_window", "full", "sliding_window_large"},
		{"full", "mamba", "full", "mamba"},
		{"sliding_window", "mamba", "sliding_window_large", "mamba"},
		{"full", "full", "sliding_window", "mamba"},
	} {
		t.Run(joinKinds(kinds), func(t *testing.T) {
			var specs []Spec
			for _, k := range kinds {
				specs = append(specs, specFor(k, bs))
			}
			m, err := New(Config{Groups: specs, NumBlocks: 10 * len(kinds)})
			require.NoError(t, err)
			common := vllmTokens(3, bs)
			p0 := append(append([]int32(nil), common...), repeat(3, 7)...)
			require.Zero(t, m.Match(p0))
			require.Len(t, admitAll(t, m, 0, p0), len(kinds))
			p1 := append(append([]int32(nil), common...), repeat(4, 5)...)
			hit, err := m.Admit(1, &Request{Prompt: p1, MaxTokens: 64})
			require.NoError(t, err)
			require.Equal(t, 3*bs, hit)
			require.NoError(t, m.CheckInvariants())
			require.NoError(t, m.Finish(0))
			require.NoError(t, m.Finish(1))
			require.NoError(t, m.CheckInvariants())
		})
	}
}

func joinKinds(k []string) string {
	s := ""
	for i, x := range k {
		if i > 0 {
			s += "+"
		}
		s += x
	}
	return s
}

// TestVLLMPrefillHybridModelCombinationsEagle is
// test_prefill_hybrid_model_combinations_eagle (vLLM tests the simple hybrid only).
func TestVLLMPrefillHybridModelCombinationsEagle(t *testing.T) {
	const bs = 16
	m, err := New(Config{Groups: []Spec{specFor("full", bs), specFor("sliding_window", bs)}, NumBlocks: 20, Eagle: true})
	require.NoError(t, err)
	common := vllmTokens(4, bs)
	p0 := append(append([]int32(nil), common...), repeat(4, 7)...)
	require.Zero(t, m.Match(p0))
	admitAll(t, m, 0, p0)
	p1 := append(append([]int32(nil), common...), repeat(6, 5)...)
	hit := m.Match(p1)
	require.Equal(t, 2*bs, hit)
	for _, b := range m.HitBlocks(p1, hit) {
		require.Len(t, b, 2)
	}
	got, err := m.Admit(1, &Request{Prompt: p1, MaxTokens: 128})
	require.NoError(t, err)
	require.Equal(t, hit, got)
	require.NoError(t, m.Finish(0))
	require.NoError(t, m.Finish(1))
	require.NoError(t, m.CheckInvariants())
}

// TestVLLMEagleWithSlidingWindow is test_eagle_with_sliding_window: a pure sliding-window
// model (one group) with EAGLE.
func TestVLLMEagleWithSlidingWindow(t *testing.T) {
	const bs = 16
	m, err := New(Config{Groups: []Spec{SlidingWindow{Block: bs, Window: bs}}, NumBlocks: 10, Eagle: true})
	require.NoError(t, err)
	prompt := repeat(0, 2*bs+5)
	require.Zero(t, m.Match(prompt))
	admitAll(t, m, 0, prompt)
	first := m.st.first(m.st.next(0, prompt[:bs]), 0)
	require.NotZero(t, first)
	require.NoError(t, m.Finish(0))
	// Two blocks match; EAGLE drops one.
	hit := m.Match(prompt)
	require.Equal(t, bs, hit)
	require.Len(t, m.HitBlocks(prompt, hit)[0], 1)
	// Without the first block the only hit is [null, block 2], and EAGLE drops it.
	m.EvictBlocks(ids(blocks.ID(first)))
	require.Zero(t, m.Match(prompt))
	require.NoError(t, m.CheckInvariants())
}

// TestVLLMDifferentBlockSize is test_different_block_size: full attention with 32-token
// blocks and a sliding window with 16-token blocks over one match unit of 16.
func TestVLLMDifferentBlockSize(t *testing.T) {
	const bs = 16
	m, err := New(Config{Groups: []Spec{
		FullAttention{Block: 2 * bs},
		SlidingWindow{Block: bs, Window: 2 * bs},
	}, NumBlocks: 100, MatchUnit: bs})
	require.NoError(t, err)
	common := vllmTokens(10, bs)
	require.Zero(t, m.Match(common))
	_, err = m.Admit(0, &Request{Prompt: common, MaxTokens: len(common), Prefill: 7 * bs})
	require.NoError(t, err)
	t0, _ := m.Table(0, 0)
	t1, _ := m.Table(0, 1)
	require.Equal(t, ids(1, 2, 3, 4), t0)
	require.Equal(t, ids(5, 6, 7, 8, 9, 10, 11), t1)

	req1 := common[:7*bs+1]
	hit := m.Match(req1)
	require.Equal(t, 6*bs, hit)
	hb := m.HitBlocks(req1, hit)
	require.Len(t, hb[0], 3)
	require.Len(t, hb[1], 6)

	req2 := common[:6*bs+1]
	hit = m.Match(req2)
	require.Equal(t, 6*bs, hit)
	hb = m.HitBlocks(req2, hit)
	require.Len(t, hb[0], 3)
	require.Len(t, hb[1], 6)

	// Without the window's blocks 10 and 11 the window could serve 5 blocks, but full
	// attention's hit must be a multiple of 32 tokens: 4 blocks of 16.
	m.EvictBlocks(ids(11, 10))
	hit = m.Match(req1)
	require.Equal(t, 4*bs, hit)
	hb = m.HitBlocks(req1, hit)
	require.Len(t, hb[0], 2)
	require.Len(t, hb[1], 4)
	require.NoError(t, m.CheckInvariants())
}

// TestVLLMCacheBlocksMultiGroup is test_cache_blocks_multi_group: blocks cached for two
// groups under the same hashes are found per group and for both.
func TestVLLMCacheBlocksMultiGroup(t *testing.T) {
	const bs = 4
	st := newStore(10, bs, 2, false)
	toks := make([]int32, 14)
	for i := range toks {
		toks[i] = int32(i)
	}
	// The request's three full blocks, as index nodes.
	var path []prefix.Node
	parent := prefix.RootNode
	for i := range 3 {
		parent = st.ensure(parent, toks[i*bs:(i+1)*bs])
		path = append(path, parent)
	}
	entries := func() int {
		n := 0
		for _, c := range st.t.Stats().Cached {
			n += c
		}
		return n
	}
	for i := range 2 { // group 0: blocks 0 and 1 of the request
		st.cache(blocks.ID(1+i), path[i], 0)
	}
	require.Equal(t, 2, entries())
	for i := range 3 { // group 1: blocks 0, 1 and 2
		st.cache(blocks.ID(4+i), path[i], 1)
	}
	require.Equal(t, 5, entries())
	both := func(i int) bool { return st.first(path[i], 0) != 0 && st.first(path[i], 1) != 0 }
	require.NotZero(t, st.first(path[0], 0))
	require.NotZero(t, st.first(path[1], 0))
	require.Zero(t, st.first(path[2], 0))
	require.NotZero(t, st.first(path[0], 1))
	require.NotZero(t, st.first(path[1], 1))
	require.NotZero(t, st.first(path[2], 1))
	require.True(t, both(0))
	require.True(t, both(1))
	require.False(t, both(2))
}
