package main

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/bench/sim"
	"github.com/kvpage/kvpage/internal/invariant"
)

// --schemes hybrid runs a hybrid preset under each layout; the JSON rows carry the
// layout, the groups' shares and the hit rate, the same as the library's run.
func TestSimHybrid(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine replay: nothing for the race detector, minutes under it; -tags kvinvariants runs it")
	}
	n, budget := 300, 64000
	if invariant.Enabled {
		n, budget = 20, 16000 // the Manager re-checks its invariants, over every block, on mutations
	}
	args := []string{"sim", "--model", "jamba-1.5-mini", "--schemes", "hybrid", "--workload", "sysprompt", "--num-prompts", strconv.Itoa(n),
		"--kv-budget-tokens", strconv.Itoa(budget), "--enable-prefix-caching", "--no-charts", "--no-progress"}
	code, out, errOut := runKV(append(args, "--json")...)
	require.Zero(t, code, errOut)
	var rep sim.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Schemes, 3)
	w, err := sim.LookupWorkload("sysprompt")
	require.NoError(t, err)
	cfg := sim.DefaultConfig(budget)
	cfg.MaxModelLen = w.MaxModelLen
	cfg.MaxNumBatchedTokens = max(8192, cfg.MaxModelLen+cfg.MaxNumSeqs)
	p := sim.Prepare(w.Generate(n, 42), cfg.MaxModelLen)
	for i, layout := range sim.HybridLayouts {
		row := rep.Schemes[i]
		assert.Equal(t, layout, row.Layout)
		assert.Equal(t, "jamba-1.5-mini", row.Model)
		require.Len(t, row.Groups, 2)
		assert.Equal(t, "state", row.Groups[0].Name)
		res, err := sim.Simulate(p.Requests, cfg, sim.Scheme{Name: sim.Hybrid, Model: "jamba-1.5-mini", Layout: layout, BlockSize: 16, PrefixSharing: true, Preemption: "fcfs"})
		require.NoError(t, err)
		assert.Equal(t, res.PrefixHitRate, row.PrefixHitRate, layout)
		assert.Equal(t, res.Groups, row.Groups, layout)
	}
	code, out, _ = runKV(args...)
	require.Zero(t, code)
	assert.Contains(t, out, "KV-cache groups of jamba-1.5-mini")

	code, _, errOut = runKV("sim", "--schemes", "hybrid", "--model", "llama-3.1-8b", "--no-charts", "--no-progress")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "one kind of layer")
	code, _, errOut = runKV("sim", "--schemes", "hybrid", "--model", "gpt-oss-20b", "--hybrid-layouts", "striped", "--no-charts", "--no-progress")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--hybrid-layouts")
}
