package hybrid

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// TestTierHitLoadingNothing: a lower-tier hit whose blocks all lie before every group's
// window or chunk (a sliding window of one token; with chunked local attention, a hit
// ending on a chunk boundary) needs none of them loaded: it is a pure hit, as vLLM's
// device hit whose blocks turn to null blocks at once, with no transfer. (It panicked:
// "preparing the load the lookup found: ... nothing to load".) The sequence is swapped
// out into the host tier, its copies confirmed, and then a longer prompt over the same
// prefix is admitted (or the sequence resumed).
func TestTierHitLoadingNothing(t *testing.T) {
	cases := []struct {
		name   string
		groups []Spec
		first  int // the swapped sequence's prompt
		second int // the next prompt over the same tokens, 0 to resume the first instead
		hit    int // its hit (a pure hit: nothing loaded)
	}{
		{name: "window of one token", groups: []Spec{SlidingWindow{Block: 4, Window: 1}}, first: 4, second: 5, hit: 4},
		{name: "window of one token, resumed", groups: []Spec{SlidingWindow{Block: 4, Window: 1}}, first: 5, hit: 4},
		{name: "window of one token and a chunk boundary", groups: []Spec{SlidingWindow{Block: 4, Window: 1}, ChunkedLocal{Block: 4, Chunk: 8}},
			first: 8, second: 9, hit: 8},
		{name: "window of one token, eagle", groups: []Spec{SlidingWindow{Block: 4, Window: 1}}, first: 8, second: 9, hit: 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := New(Config{Groups: c.groups, NumBlocks: 8, Eagle: c.name == "window of one token, eagle",
				Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 24, Write: prefix.WriteBack}}, BlockBytes: 64, FreeTarget: 3}})
			require.NoError(t, err)
			_, err = m.Admit(1, &Request{Prompt: toks(0, c.first), MaxTokens: c.first + 4})
			require.NoError(t, err)
			_, err = m.PreemptSeq(1, blocktable.Swap)
			require.NoError(t, err)
			plans := m.TakePlans(nil)
			require.NotEmpty(t, plans, "the swap demotes the cached blocks")
			for _, p := range plans {
				_, err := m.CompleteTransfer(p.ID, true)
				require.NoError(t, err)
			}
			require.Zero(t, m.Stats().CachedPrefixes[0], "the device holds none of the prefix")
			var r AdmitResult
			next := toks(0, max(c.first, c.second))
			hm, err := m.MatchRequest(&Request{Prompt: next})
			require.NoError(t, err)
			require.Equal(t, c.hit, hm, "MatchRequest: the hit Admit takes, the pure lower-tier hit included")
			var e prefix.Explanation
			he, err := m.Explain(&Request{Prompt: next}, &e)
			require.NoError(t, err)
			require.Equal(t, c.hit, he, "Explain: the hit Admit takes, the pure lower-tier hit included")
			require.Equal(t, c.hit/m.unit, e.MatchedBlocks)
			if c.second == 0 {
				h, l, err := m.MatchTiers(&Request{Prompt: toks(0, c.first)})
				require.NoError(t, err)
				require.Equal(t, [2]int{c.hit, 0}, [2]int{h, l}, "MatchTiers")
				require.NotPanics(t, func() { r, err = m.Resume(1) })
			} else {
				h, l, err := m.MatchTiers(&Request{Prompt: toks(0, c.second)})
				require.NoError(t, err)
				require.Equal(t, [2]int{c.hit, 0}, [2]int{h, l}, "MatchTiers")
				require.NotPanics(t, func() { r, err = m.AdmitTiered(2, &Request{Prompt: toks(0, c.second), MaxTokens: c.second + 4}) })
			}
			require.NoError(t, err)
			require.Equal(t, c.hit, r.Hit)
			require.Zero(t, r.LoadTokens)
			require.Zero(t, r.Load)
			require.Zero(t, r.Tiers.Lower)
			require.Zero(t, m.PendingTransfers())
			require.Empty(t, m.TakePlans(nil))
			require.NoError(t, m.CheckInvariants())
		})
	}
}

func reproTiered(t *testing.T, nb int, w prefix.WritePolicy) *Manager {
	m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}}, NumBlocks: nb,
		Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 24, Write: w}}, BlockBytes: 64}})
	require.NoError(t, err)
	return m
}

// TestTierEvictBlocksWithStoreInFlight: EvictBlocks on a block whose write-through copy
// is in flight keeps the books consistent.
func TestTierEvictBlocksWithStoreInFlight(t *testing.T) {
	m := reproTiered(t, 16, prefix.WriteThrough)
	_, err := m.Admit(1, &Request{Prompt: toks(0, 9), MaxTokens: 9})
	require.NoError(t, err)
	m.EvictBlocks([]blocks.ID{1})
	require.NoError(t, m.CheckInvariants())
}

// TestTierFailedStoreKeepsClosure: failed write-through copies of a prefix whose device
// blocks were evicted meanwhile leave the tree's closure whole for the next admission.
func TestTierFailedStoreKeepsClosure(t *testing.T) {
	m := reproTiered(t, 8, prefix.WriteThrough)
	_, err := m.Admit(1, &Request{Prompt: toks(0, 1), MaxTokens: 1})
	require.NoError(t, err)
	_, err = m.Admit(2, &Request{Prompt: toks(0, 12), MaxTokens: 12})
	require.NoError(t, err)
	require.NoError(t, m.Finish(1))
	_, err = m.Admit(3, &Request{Prompt: toks(1000, 13), MaxTokens: 13})
	require.NoError(t, err)
	require.NoError(t, m.Finish(2))
	for _, p := range m.TakePlans(nil) {
		_, err := m.CompleteTransfer(p.ID, false)
		require.NoError(t, err)
	}
	_, err = m.Admit(4, &Request{Prompt: toks(0, 1), MaxTokens: 1})
	require.NoError(t, err)
	require.NoError(t, m.CheckInvariants())
}
