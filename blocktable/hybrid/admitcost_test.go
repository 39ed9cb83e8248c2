package hybrid

import (
	"fmt"
	"math"
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestAdmitCostIsAdmitsCount: over random hybrid models and states (the lockstep test's
// mix of admissions, forks, appends, window releases and preemptions, with chunked
// prefills, hit limits and cache-read skips), AdmitCost's hit is the hit Admit then takes,
// its Need is exactly the free blocks Admit takes (Admit refuses exactly when Need exceeds
// them), its per-group figures add up to Need, and it changes nothing.
func TestAdmitCostIsAdmitsCount(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const bs = 4
		var specs []Spec
		for g := range rapid.IntRange(1, 3).Draw(rt, "groups") {
			switch rapid.IntRange(0, 3).Draw(rt, fmt.Sprint("kind", g)) {
			case 0:
				specs = append(specs, FullAttention{Block: bs})
			case 1:
				specs = append(specs, SlidingWindow{Block: bs, Window: rapid.IntRange(1, 9).Draw(rt, "window")})
			case 2:
				specs = append(specs, Mamba{Block: bs, Mode: MambaAll})
			default:
				specs = append(specs, Mamba{Block: bs, Mode: MambaAlign})
			}
		}
		nb := rapid.IntRange(6, 40).Draw(rt, "blocks")
		m, err := New(Config{Groups: specs, NumBlocks: nb})
		require.NoError(rt, err)
		var c AdmitCost
		for id := range blocktable.SeqID(rapid.IntRange(1, 30).Draw(rt, "steps")) {
			if rapid.Bool().Draw(rt, "step a running one") {
				ids := m.Seqs(nil)
				if len(ids) > 0 {
					v := rapid.SampledFrom(ids).Draw(rt, "seq")
					switch rapid.IntRange(0, 2).Draw(rt, "op") {
					case 0:
						_ = m.Append(v, []int32{int32(id)})
					case 1:
						_ = m.Finish(v)
					default:
						_, _ = m.Preempt(blocktable.PreemptRequest{Need: 1}, nil)
					}
				}
			}
			n := rapid.IntRange(1, 24).Draw(rt, "len")
			prompt := make([]int32, n)
			base := int32(rapid.IntRange(0, 2).Draw(rt, "base")) * 1000
			for i := range prompt {
				prompt[i] = base + int32(i)
			}
			req := &Request{Prompt: prompt, MaxTokens: n + 4, HitLimit: rapid.IntRange(0, n).Draw(rt, "hit limit"),
				SkipCacheRead: rapid.IntRange(0, 5).Draw(rt, "skip") == 0}
			if rapid.Bool().Draw(rt, "chunked") {
				req.Prefill = rapid.IntRange(1, n).Draw(rt, "prefill")
			}
			before := m.Stats()
			require.NoError(rt, m.AdmitCost(req, &c))
			require.Equal(rt, before, m.Stats(), "AdmitCost changes nothing")
			sum := 0
			for _, k := range c.Groups {
				sum += k
			}
			require.Len(rt, c.Groups, len(specs))
			require.Equal(rt, c.Need, sum)
			hit, err := m.Admit(id, req)
			if c.Need > before.Free {
				require.Error(rt, err, "need %d, free %d", c.Need, before.Free)
				continue
			}
			require.NoError(rt, err, "need %d, free %d", c.Need, before.Free)
			require.Equal(rt, c.Hit, hit)
			require.Equal(rt, c.Need, before.Free-m.Stats().Free, "the blocks Admit took")
			require.NoError(rt, m.CheckInvariants())
		}
	})
}

// AdmitCost refuses what Admit refuses as invalid, and allocates nothing once warm.
func TestAdmitCostRefusesAndAllocatesNothing(t *testing.T) {
	m, err := New(windowConfig(32))
	require.NoError(t, err)
	_, err = m.Admit(1, &Request{Prompt: toks(0, 12), MaxTokens: 16})
	require.NoError(t, err)
	var c AdmitCost
	for _, bad := range []*Request{nil, {}, {Prompt: toks(0, 4), MaxTokens: 3}, {Prompt: toks(0, 4), MaxTokens: math.MaxInt32 + 1}} {
		require.ErrorIs(t, m.AdmitCost(bad, &c), blocktable.ErrInvalidArgument, "%+v", bad)
	}
	require.ErrorIs(t, m.AdmitCost(&Request{Prompt: toks(0, 4), MaxTokens: 4}, nil), blocktable.ErrInvalidArgument)
	req := &Request{Prompt: toks(0, 13), MaxTokens: 16}
	require.NoError(t, m.AdmitCost(req, &c))
	require.Equal(t, AdmitCost{Hit: 12, Need: 2, Groups: []int{1, 1}}, c, "12 tokens hit; the window's hit blocks are held; one new block a group")
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = m.AdmitCost(req, &c) }))
}
