package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kvpage plan --config on a hybrid config.json without torch_dtype sizes the Mamba
// state in bf16 whatever --kv-cache-dtype is, as vLLM does: its mamba cache dtypes
// default to auto, the model's dtype, and a config without torch_dtype is float32,
// which --dtype auto downcasts to bf16. Before, --kv-cache-dtype fp8 made the state fp8
// (half the bytes) and fp32 twice them.
func TestPlanConfigWithoutTorchDTypeKeepsStateBF16(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "blocks", "sizing", "testdata", "configs", "ai21-jamba-1.5-mini.json"))
	require.NoError(t, err)
	var c map[string]any
	require.NoError(t, json.Unmarshal(raw, &c))
	require.Equal(t, "bfloat16", c["torch_dtype"])
	delete(c, "torch_dtype")
	raw, err = json.Marshal(c)
	require.NoError(t, err)
	cfg := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(cfg, raw, 0o600))
	const state = 28 * 311_296 // Jamba 1.5 Mini's 28 Mamba layers in bf16 (the preset's)
	for _, kv := range []string{"fp8", "fp32", "bf16"} {
		code, out, errOut := runKV("plan", "--config", cfg, "--weights", "10GB", "--gpu", "h100", "--max-model-len", "32k", "--kv-cache-dtype", kv, "--json")
		require.Zero(t, code, errOut)
		var j planJSON
		require.NoError(t, json.Unmarshal([]byte(out), &j))
		assert.Equal(t, int64(state), j.StateBytesPerRequestPerGPU, "--kv-cache-dtype %s", kv)
		require.NotNil(t, j.Layouts, kv)
		require.NotEmpty(t, j.Layouts.Groups, kv)
		assert.Equal(t, layerGroupJSON{Kind: "state", Layers: 28, StateBytes: state}, j.Layouts.Groups[0], "--kv-cache-dtype %s", kv)
	}
}
