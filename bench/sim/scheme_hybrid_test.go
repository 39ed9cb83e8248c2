package sim

import (
	"bytes"
	"testing"

	"github.com/kvpage/kvpage/internal/invariant"

	"github.com/stretchr/testify/require"
)

func hybridSchemes(model string, stateBlock int) []Scheme {
	var out []Scheme
	for _, l := range HybridLayouts {
		out = append(out, Scheme{Name: Hybrid, Model: model, Layout: l, BlockSize: 16, PrefixSharing: true, StateBlock: stateBlock})
	}
	return out
}

func TestHybridSchemeRuns(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine replay: nothing for the race detector, minutes under it; -tags kvinvariants runs it")
	}
	w, err := LookupWorkload("sysprompt")
	require.NoError(t, err)
	n, budget := 600, 64<<10
	if invariant.Enabled {
		n, budget = 40, 16<<10 // every step's deep check walks every block
	}
	for _, model := range []string{"gpt-oss-20b", "jamba-1.5-mini", "gemma-3-27b"} {
		cfg := DefaultConfig(budget)
		p := Prepare(w.Generate(n, 7), cfg.MaxModelLen)
		var results []*Result
		for _, s := range hybridSchemes(model, 0) {
			r, err := simulate(p.Requests, cfg, s, true)
			require.NoError(t, err, s.Label())
			t.Logf("%s: hit %.3f run %.1f preempt %d groups %+v", s.Label(), r.PrefixHitRate, r.MeanRunning, r.TotalPreemptions, r.Groups)
			require.Len(t, r.Groups, 2)
			var sum float64
			for _, g := range r.Groups {
				sum += g.Share
			}
			require.InDelta(t, r.Shares.Tokens, sum, 1e-3, "the groups split the memory in use")
			require.Positive(t, r.PrefixHitRate)
			results = append(results, r)
		}
		if model == "gpt-oss-20b" {
			// One page size: the three layouts are the same pool.
			for _, r := range results[1:] {
				require.Equal(t, results[0].PrefixHitRate, r.PrefixHitRate)
				require.Equal(t, results[0].MeanRunning, r.MeanRunning)
			}
		}
	}
}

func TestHybridSchemeValidation(t *testing.T) {
	cfg := DefaultConfig(64 << 10)
	for _, s := range []Scheme{
		{Name: Hybrid, Layout: LayoutUniform, BlockSize: 16},
		{Name: Hybrid, Model: "llama-3.1-8b", Layout: LayoutUniform, BlockSize: 16},
		{Name: Hybrid, Model: "jamba-1.5-mini", Layout: "striped", BlockSize: 16},
		{Name: Hybrid, Model: "jamba-1.5-mini", Layout: LayoutCarved, BlockSize: 16, PrefixSharing: true, Eviction: "fifo"},
		{Name: Paged, Model: "jamba-1.5-mini", BlockSize: 16},
		{Name: Hybrid, Model: "jamba-1.5-mini", Layout: LayoutCarved, BlockSize: 16, MambaMode: "sometimes"},
	} {
		require.ErrorIs(t, s.validate(&cfg), ErrInvalidConfig, "%+v", s)
	}
}

// vLLM's align mode runs under every layout: a running state block per sequence.
func TestHybridSchemeAlignMode(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine replay: nothing for the race detector; -tags kvinvariants runs it")
	}
	w, err := LookupWorkload("sysprompt")
	require.NoError(t, err)
	cfg := DefaultConfig(16 << 10)
	p := Prepare(w.Generate(30, 7), cfg.MaxModelLen)
	for _, s := range hybridSchemes("qwen3-next-80b-a3b", 0) {
		s.MambaMode = "align"
		r, err := simulate(p.Requests, cfg, s, true)
		require.NoError(t, err, s.Label())
		require.Len(t, r.Groups, 2)
		require.Contains(t, s.Label(), "align")
	}
}

// Readmissions after preemption are hybrid.Request.Resumed: every pool counts their
// prompt tokens apart (the allocator's check compares them each step), and the result
// reports their re-hits apart from the hit rate, which they would flatter. Jamba's
// per-class pools preempt often on sysprompt.
func TestHybridSchemeCountsReadmissionsApart(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine replay: nothing for the race detector; -tags kvinvariants runs it")
	}
	w, err := LookupWorkload("sysprompt")
	require.NoError(t, err)
	n, budget := 300, 32<<10
	if invariant.Enabled {
		n = 60 // every step's deep check walks every block
	}
	cfg := DefaultConfig(budget)
	p := Prepare(w.Generate(n, 7), cfg.MaxModelLen)
	s := Scheme{Name: Hybrid, Model: "jamba-1.5-mini", Layout: LayoutPerClass, BlockSize: 16, PrefixSharing: true}
	r, err := simulate(p.Requests, cfg, s, true)
	require.NoError(t, err)
	require.Positive(t, r.Preemptions)
	require.True(t, r.ResumedApart)
	require.Positive(t, r.ResumedPromptTokens)
	require.Positive(t, r.ResumedHitRate)
	t.Logf("hit rate %.3f, readmissions re-hit %.3f of %d tokens", r.PrefixHitRate, r.ResumedHitRate, r.ResumedPromptTokens)
	var b bytes.Buffer
	require.NoError(t, WriteTable(&b, []*Result{r}))
	require.Contains(t, b.String(), "Readmissions after preemption, counted apart from the hit rate")
}
