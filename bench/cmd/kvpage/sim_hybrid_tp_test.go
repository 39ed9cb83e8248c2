package main

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/bench/sim"
)

// With -tp above 1 the hybrid rows charge each GPU's shard, as the paged rows do: the
// device holds --kv-budget-tokens tokens of the model's per-GPU bytes (the paged row's
// budget in bytes, less the whole pages), and the host, which the GPUs share, holds
// blocks of tp shards each, sim.TierBlocks's count for the pool's page. The hybrid rows
// used the whole model's bytes: twice the paged row's device and host bytes at -tp 2,
// and at -tp 4, where Qwen3-Next's two KV heads are replicated, a host of as many
// whole-model pages as at -tp 1 instead of the paged row's half.
func TestSimHybridChargesEachGPUsShard(t *testing.T) {
	const budget, host = 64000, 8 << 30
	for _, tp := range []int{2, 4} {
		code, out, errOut := runKV("sim", "--schemes", "paged,hybrid", "--hybrid-layouts", "uniform,per-class", "--model", "qwen3-next-80b-a3b",
			"--kv-cache-dtype", "bf16", "-tp", strconv.Itoa(tp), "--kv-budget-tokens", strconv.Itoa(budget), "--host-ram", "8GiB",
			"--prefix-sharing", "on", "--block-size-sweep=", "--num-prompts", "20", "--no-charts", "--no-progress", "--json")
		require.Zero(t, code, errOut)
		var rep sim.Report
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		require.Len(t, rep.Schemes, 3)
		paged := rep.Schemes[0]
		require.Equal(t, sim.Paged, paged.Name)
		perToken := float64(paged.Tiers[0].CapacityBytes) / float64(paged.Tiers[0].CapacityBlocks*paged.BlockSize) // per GPU
		pagedHostTokens := paged.Tiers[1].CapacityBlocks * paged.BlockSize
		for _, row := range rep.Schemes[1:] {
			require.Equal(t, sim.Hybrid, row.Name)
			dev, cpu := row.Tiers[0], row.Tiers[1]
			assert.LessOrEqual(t, float64(dev.CapacityBytes), budget*perToken, "tp %d %s: the device is one GPU's budget", tp, row.Label)
			assert.Greater(t, float64(dev.CapacityBytes), 0.95*budget*perToken, "tp %d %s: less only whole pages", tp, row.Label)
			assert.LessOrEqual(t, cpu.CapacityBytes, int64(host/tp), "tp %d %s: the host's bytes are this GPU's shards", tp, row.Label)
			assert.Greater(t, cpu.CapacityBytes, int64(0.95*host/float64(tp)), "tp %d %s", tp, row.Label)
			if row.Layout == sim.LayoutUniform { // one pool, one page
				page := dev.CapacityBytes / int64(dev.CapacityBlocks)
				want, err := sim.TierBlocks(host, page, tp)
				require.NoError(t, err)
				assert.Equal(t, want, cpu.CapacityBlocks, "tp %d: the paged rows' count for a %d-byte page", tp, page)
			}
		}
		if tp == 4 {
			assert.Equal(t, 10922, pagedHostTokens/paged.BlockSize, "replicated KV heads: half the blocks of -tp 1 (21,845)")
		}
	}
}
