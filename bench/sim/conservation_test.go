package sim

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/internal/invariant"
)

// allSchemes lists one configuration of every scheme, paged ones with and without
// prefix sharing, over a few block sizes.
func allSchemes() []Scheme {
	s := []Scheme{
		{Name: OrcaMax}, {Name: OrcaPow2}, {Name: OrcaOracle},
		{Name: Paged, BlockSize: 1}, {Name: Paged, BlockSize: 16}, {Name: Paged, BlockSize: 16, PrefixSharing: true},
		{Name: Paged, BlockSize: 16, PrefixSharing: true, Eviction: "lfu", Preemption: "progress"},
		{Name: Paged, BlockSize: 8, Watermark: 0.05, Preemption: "cost"},
	}
	if invariant.Enabled {
		// Block size 1 makes every token a pool and manager mutation (and with sharing an
		// index one), each re-checked under -race and kvinvariants: 4 takes the same paths
		// in a fraction of the time.
		s[3].BlockSize = 4
		return s
	}
	return append(s, Scheme{Name: Paged, BlockSize: 1, PrefixSharing: true})
}

// Every step of every scheme on every workload splits the budget exactly:
// tokens + reserved + internal + external + free = capacity, and each allocator's own
// books (arena holes, the Manager's invariants, the pool against the simulator's counts)
// agree, checked at every step.
func TestConservationEveryStep(t *testing.T) {
	// Under -race and -tags kvinvariants every pool, index and manager mutation re-checks
	// the library's invariants too, so those builds run fewer requests.
	n := 150
	if invariant.Enabled || testing.Short() {
		n = 20
	}
	for _, w := range Workloads {
		tr := w.Generate(n, 7)
		WithPoissonArrivals(tr, 400, 7)    // some idle gaps, some queueing
		maxLen := min(w.MaxModelLen, 4096) // a small pool keeps the deep checks quick
		if invariant.Enabled {
			maxLen = min(maxLen, 2048)
		}
		p := Prepare(tr, maxLen)
		cfg := tinyConfig(2*maxLen, maxLen)
		cfg.MaxNumSeqs, cfg.MaxNumBatchedTokens, cfg.StepDuration = 64, maxLen+64, 0.01
		for _, s := range allSchemes() {
			t.Run(fmt.Sprintf("%s/%s", w.Name, s.Label()), func(t *testing.T) {
				steps, weight := 0, 0
				cfg.OnStep = func(r StepRecord) {
					steps++
					weight += r.Weight
					require.NoError(t, r.Usage.Check(cfg.Capacity), "step %d", r.Step)
				}
				res, err := simulate(p.Requests, cfg, s, true)
				require.NoError(t, err)
				assert.Equal(t, res.TotalSteps, weight, "records cover every step")
				sum := res.Shares.Tokens + res.Shares.Reserved + res.Shares.Internal + res.Shares.External + res.Shares.Free
				assert.InDelta(t, 1, sum, 1e-9)
				assert.Equal(t, len(p.Requests), res.Requests)
			})
		}
	}
}

func TestUsageCheckRejectsBrokenSplits(t *testing.T) {
	assert.NoError(t, Usage{Tokens: 3, Free: 7, Cached: 2}.Check(10))
	assert.Error(t, Usage{Tokens: 3, Free: 6}.Check(10), "adds up to 9")
	assert.Error(t, Usage{Tokens: -1, Free: 11}.Check(10), "negative part")
	assert.Error(t, Usage{Tokens: 3, Free: 7, Cached: 8}.Check(10), "cached beyond free")
}
