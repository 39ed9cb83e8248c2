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

// --host-ram reaches the hybrid scheme's prefix-sharing rows: their JSON rows carry the
// tiers (the host's bytes split across the pools, whole blocks of each), the run is the
// library's with the same tiers, and the host serves hits; the rows without prefix
// sharing have none. A combination the scheme cannot honour is a flag error.
func TestSimHybridHostRAM(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine replay: nothing for the race detector, minutes under it; -tags kvinvariants runs it")
	}
	n := 200
	if invariant.Enabled {
		n = 30
	}
	args := []string{"sim", "--model", "qwen3-next-80b-a3b", "--schemes", "hybrid", "--hybrid-layouts", "uniform,per-class", "--workload", "conversation",
		"--num-prompts", strconv.Itoa(n), "--kv-budget-tokens", "24000", "--host-ram", "8GiB", "--host-gbps", "0", "--no-charts", "--no-progress"}
	code, out, errOut := runKV(append(args, "--json")...)
	require.Zero(t, code, errOut)
	var rep sim.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Schemes, 4)
	w, err := sim.LookupWorkload("conversation")
	require.NoError(t, err)
	cfg := sim.DefaultConfig(24000)
	cfg.MaxModelLen = w.MaxModelLen
	cfg.MaxNumBatchedTokens = max(8192, cfg.MaxModelLen+cfg.MaxNumSeqs)
	p := sim.Prepare(w.Generate(n, 42), cfg.MaxModelLen)
	for _, row := range rep.Schemes {
		if !row.PrefixSharing {
			assert.Empty(t, row.Tiers, row.Label)
			continue
		}
		require.Len(t, row.Tiers, 2, row.Label)
		assert.Contains(t, row.Label, "host=8GiB")
		assert.LessOrEqual(t, row.Tiers[1].CapacityBytes, int64(8<<30))
		assert.Greater(t, row.Tiers[1].CapacityBytes, int64(8<<30)*99/100, "%s: every pool's share in whole blocks", row.Label)
		assert.Positive(t, row.Tiers[1].HitTokens, row.Label)
		res, err := sim.Simulate(p.Requests, cfg, sim.Scheme{Name: sim.Hybrid, Model: "qwen3-next-80b-a3b", Layout: row.Layout, BlockSize: 16,
			PrefixSharing: true, Preemption: "fcfs", Tiers: sim.Tiers{HostBytes: 8 << 30, DiskGBps: 5}})
		require.NoError(t, err)
		assert.Equal(t, res.PrefixHitRate, row.PrefixHitRate, row.Label)
		assert.Equal(t, res.Tiers, row.Tiers, row.Label)
	}

	for _, bad := range [][]string{
		{"--prefix-sharing", "off"}, // no row can take the tier
	} {
		code, _, errOut = runKV(append(append([]string{}, args...), bad...)...)
		assert.Equal(t, 2, code, "%v: %s", bad, errOut)
		assert.Contains(t, errOut, "--host-ram", "%v", bad)
	}
}

// The --host-ram line of the KV budget gives each scheme's own bytes per token: the
// paged rows the sizing plan's (per GPU, --kv-cache-dtype; a block takes every GPU's
// shard), the hybrid rows the scheme's (attention layers in --kv-cache-dtype, per GPU
// too), which is how it sizes its pools' shares of the host. Under fp8 both are fp8's
// (the hybrid rows' were bf16's, twice the paged rows', before the scheme took the data
// type). Mamba align mode takes the tier too.
func TestSimHybridHostRAMBytesPerToken(t *testing.T) {
	args := []string{"sim", "--model", "qwen3-next-80b-a3b", "--hybrid-layouts", "uniform", "--workload", "conversation", "--prefix-sharing", "on",
		"--num-prompts", "10", "--kv-budget-tokens", "24000", "--host-ram", "8GiB", "-tp", "2", "--kv-cache-dtype", "fp8",
		"--mamba-cache-mode", "align", "--block-size-sweep", "", "--no-charts", "--no-progress", "--json"}
	const hy = "; hybrid runs split host and disk across their pools as the device budget, in blocks of 6144 bytes per token per GPU of qwen3-next-80b-a3b's attention layers"
	for schemes, want := range map[string]string{
		"hybrid":       "24,000 tokens (--kv-budget-tokens); lower tiers: host 8.00 GiB (25 GB/s)" + hy,
		"hybrid,paged": "24,000 tokens (--kv-budget-tokens); lower tiers: host 8.00 GiB (25 GB/s), 6144 bytes per token of qwen3-next-80b-a3b per GPU, the tiers shared by the 2 GPUs' shards" + hy,
	} {
		code, out, errOut := runKV(append(args, "--schemes", schemes)...)
		require.Zero(t, code, errOut)
		var rep sim.Report
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		assert.Equal(t, want, rep.Memory, schemes)
		for _, row := range rep.Schemes {
			assert.NotEmpty(t, row.Tiers, "%s: %s", schemes, row.Label)
		}
	}
}
