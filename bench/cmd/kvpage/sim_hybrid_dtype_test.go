package main

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/bench/sim"
)

// The hybrid rows hold KV in --kv-cache-dtype, as the paged rows do: on the device,
// --kv-budget-tokens tokens of the bytes per token the paged row's plan sizes (less the
// whole pages), and so half the bytes in fp8 as in bf16. The hybrid rows were always
// sized in bf16: in fp8 they held twice the paged row's bytes, and their Mamba state
// twice the room it has.
func TestSimHybridSizesKVInTheCacheDType(t *testing.T) {
	const budget = 256000 // a large one: a pool loses under one page, and a state page of Qwen3-Next is 40 MB
	for _, model := range []string{"qwen3-next-80b-a3b", "jamba-1.5-mini", "gpt-oss-20b"} {
		device := map[string]map[string]int64{} // dtype, layout: the hybrid row's device bytes
		for _, dtype := range []string{"bf16", "fp8"} {
			code, out, errOut := runKV("sim", "--schemes", "paged,hybrid", "--hybrid-layouts", "uniform,per-class", "--model", model,
				"--kv-cache-dtype", dtype, "--kv-budget-tokens", strconv.Itoa(budget), "--host-ram", "8GiB",
				"--prefix-sharing", "on", "--block-size-sweep=", "--num-prompts", "20", "--no-charts", "--no-progress", "--json")
			require.Zero(t, code, errOut)
			var rep sim.Report
			require.NoError(t, json.Unmarshal([]byte(out), &rep))
			require.Len(t, rep.Schemes, 3)
			paged := rep.Schemes[0]
			require.Equal(t, sim.Paged, paged.Name)
			perToken := float64(paged.Tiers[0].CapacityBytes) / float64(paged.Tiers[0].CapacityBlocks*paged.BlockSize)
			device[dtype] = map[string]int64{}
			for _, row := range rep.Schemes[1:] {
				require.Equal(t, sim.Hybrid, row.Name)
				dev := row.Tiers[0].CapacityBytes
				device[dtype][row.Layout] = dev
				assert.LessOrEqual(t, float64(dev), budget*perToken, "%s %s %s: the paged row's %g bytes a token", model, dtype, row.Label, perToken)
				assert.Greater(t, float64(dev), 0.95*budget*perToken, "%s %s %s: less only whole pages", model, dtype, row.Label)
			}
		}
		for layout, bf16 := range device["bf16"] {
			assert.InDelta(t, 0.5, float64(device["fp8"][layout])/float64(bf16), 0.05, "%s %s: fp8 holds the budget's tokens in half the bytes", model, layout)
		}
	}
}
