package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks/sizing"
)

// A hybrid preset's plan carries the layout comparison, the same rows as
// sizing.CompareLayouts at --max-model-len over the total KV budget; a model of one kind
// of layer has none.
func TestPlanHybridLayouts(t *testing.T) {
	code, out, errOut := runKV("plan", "--model", "jamba-1.5-mini", "--gpu", "h100", "-tp", "4", "--max-model-len", "32k", "--json")
	require.Zero(t, code, errOut)
	var j planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &j))
	require.NotNil(t, j.Layouts)
	assert.Equal(t, int64(28*311_296/4), j.StateBytesPerRequestPerGPU)
	assert.Equal(t, []layerGroupJSON{{Kind: "state", Layers: 28, StateBytes: 28 * 311_296}, {Kind: "full", Layers: 4, BytesPerToken: 16_384}}, j.Layouts.Groups)
	m, err := sizing.ModelPreset("jamba-1.5-mini")
	require.NoError(t, err)
	h, err := m.Hybrid(sizing.BF16)
	require.NoError(t, err)
	want, err := sizing.CompareLayouts(h, 32000, 32000, j.KVCacheBytes)
	require.NoError(t, err)
	require.Len(t, j.Layouts.Rows, 3)
	for i, r := range want {
		got := j.Layouts.Rows[i]
		assert.Equal(t, string(r.Layout), got.Layout)
		assert.Equal(t, r.BlockTokens, got.BlockTokens)
		assert.Equal(t, r.Blocks, got.BlocksPerSeq)
		assert.Equal(t, r.Concurrency, got.MaxConcurrency)
	}
	assert.Equal(t, 80, j.Layouts.Rows[0].BlockTokens, "vLLM raises attention's block to hold a Mamba state")

	code, out, _ = runKV("plan", "--model", "jamba-1.5-mini", "--gpu", "h100", "-tp", "4", "--max-model-len", "32k")
	require.Zero(t, code)
	assert.Contains(t, out, "hybrid memory layouts, 32,000 tokens")
	assert.Contains(t, out, "carved pages (Jenga)")

	code, out, _ = runKV("plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "8k")
	require.Zero(t, code)
	assert.NotContains(t, out, "hybrid memory layouts")
}
