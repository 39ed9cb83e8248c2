package sim

import (
	"testing"

	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/internal/invariant"

	"github.com/stretchr/testify/require"
)

// Align mode splits a prefill on the prompt's last block boundary, as vLLM's scheduler
// does, so the state there is cached: the same prompt again hits up to that boundary.
// Admitted in one prefill, no state is ever cached inside a prompt (the running block
// fills only during decode, with output tokens), and the second request hits nothing.
func TestHybridSchemeAlignSplitsPrefill(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine replay: nothing for the race detector; -tags kvinvariants runs it")
	}
	const input = 1000
	reqs := []Request{
		{ID: 0, Input: input, Output: 4, Group: 0, Shared: input},
		{ID: 1, Input: input, Output: 4, Group: 0, Shared: input, After: 1},
	}
	cfg := DefaultConfig(16 << 10)
	for _, s := range hybridSchemes("jamba-1.5-mini", 0) {
		s.MambaMode = hybrid.MambaAlign
		a, err := newHybridAlloc(&cfg, s, nil, false)
		require.NoError(t, err)
		want := (input - 1) / a.lcm * a.lcm
		require.Positive(t, want)
		r, err := simulate(reqs, cfg, s, true)
		require.NoError(t, err, s.Label())
		require.InDelta(t, float64(want)/(2*input), r.PrefixHitRate, 1e-9, "%s: the second prompt hits up to the last boundary of %d", s.Label(), a.lcm)
	}
}

// The per-class layout admits a request into every pool or into none: when a later pool
// is short, the earlier ones are left exactly as they were (no prompt blocks cached by a
// half-done admission).
func TestHybridPerClassRefusalChangesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine replay: nothing for the race detector; -tags kvinvariants runs it")
	}
	// Align mode: the state pool (the first) is split for two state blocks a request, the
	// attention pool for max-model-len, so long prompts find the attention pool short.
	cfg := DefaultConfig(16 << 10)
	s := Scheme{Name: Hybrid, Model: "jamba-1.5-mini", Layout: LayoutPerClass, BlockSize: 16, PrefixSharing: true, StateBlock: 16, MambaMode: hybrid.MambaAlign}
	require.NoError(t, s.validate(&cfg))
	n := 200
	if invariant.Enabled {
		n = 60
	}
	reqs := make([]Request, n)
	seqs := make([]seq, n)
	for i := range reqs {
		in := 30 + (i*97)%400 // short and long prompts, so either pool can run short
		reqs[i] = Request{ID: i, Input: in, Output: 8, Group: 0, Shared: in / 2}
		seqs[i].req = &reqs[i]
	}
	a, err := newHybridAlloc(&cfg, s, seqs, false)
	require.NoError(t, err)
	require.Len(t, a.pools, 2)
	laterShort, admitted := 0, 0
	for i := range seqs {
		sq := &seqs[i]
		before := a.poolStats()
		req := a.request(sq, sq.req.Input)
		_, hit0 := a.commonHit(req)
		need0, err := a.pools[0].need(req, hit0, len(req.Prompt))
		require.NoError(t, err)
		first := need0 <= a.pools[0].m.Stats().Free
		_, _, ok, err := a.admit(sq, 1<<20)
		require.NoError(t, err)
		if ok {
			admitted++
			continue
		}
		if first {
			laterShort++
		}
		require.Equal(t, before, a.poolStats(), "request %d refused", i)
		require.NoError(t, a.check(true))
		// Free the oldest running request so that the next ones can come in.
		for j := range seqs[:i] {
			if _, running := a.running[j]; running {
				require.NoError(t, a.finish(&seqs[j]))
				break
			}
		}
	}
	require.Positive(t, admitted)
	require.Positive(t, laterShort, "no refusal came from the second pool with the first able to admit")
}
