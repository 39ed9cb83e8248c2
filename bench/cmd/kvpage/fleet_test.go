package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func rows(t *testing.T, obj map[string]any, key string) []map[string]any {
	t.Helper()
	list, ok := obj[key].([]any)
	require.True(t, ok, "%s is not a list", key)
	out := make([]map[string]any, len(list))
	for i, r := range list {
		out[i], ok = r.(map[string]any)
		require.True(t, ok)
	}
	return out
}

// The numbers are worked by hand in blocks' TestPlanFleetChoosesTheFewestGPUs.
func TestFleetJSON(t *testing.T) {
	obj := planJSONOf(t, 0, "fleet", "--model", "llama-3.1-70b", "--gpu", "h100-80gb", "--concurrent", "10000", "--avg-context", "8k")
	assert.Equal(t, "464", num(t, obj, "gpus_needed"))
	assert.Equal(t, "58", num(t, obj, "replicas"))
	assert.Equal(t, "174", num(t, obj, "requests_per_replica"))
	assert.Equal(t, "8", num(t, obj, "tensor_parallel_size"))
	assert.Equal(t, true, obj["tensor_parallel_size_chosen"])
	assert.Equal(t, "10000", num(t, obj, "concurrent"))
	assert.Equal(t, "8000", num(t, obj, "avg_context"))
	assert.Equal(t, "26214400000000", num(t, obj, "cache_bytes"))
	// The plan fields are there too, for one replica at the average context.
	assert.Equal(t, "327680", num(t, obj, "bytes_per_token"))
	assert.Equal(t, "40960", num(t, obj, "bytes_per_token_per_gpu"))
	assert.Equal(t, true, obj["fits"])

	byContext := rows(t, obj, "sensitivity_context")
	require.Len(t, byContext, 4)
	var gpus []int64
	for i, ctx := range []string{"4000", "8000", "32000", "128000"} {
		assert.Equal(t, ctx, byContext[i]["context"].(json.Number).String())
		n, err := byContext[i]["gpus_needed"].(json.Number).Int64()
		require.NoError(t, err)
		gpus = append(gpus, n)
	}
	for i := 1; i < len(gpus); i++ {
		assert.Greater(t, gpus[i], gpus[i-1], "longer contexts need more GPUs")
	}
	byDType := rows(t, obj, "sensitivity_kv_cache_dtype")
	require.Len(t, byDType, 2)
	assert.Equal(t, "bf16", byDType[0]["kv_cache_dtype"], "the model's own 16-bit type, not fp16")
	assert.Equal(t, "fp8_e4m3", byDType[1]["kv_cache_dtype"])
	assert.Equal(t, "327680", byDType[0]["bytes_per_token"].(json.Number).String())
	assert.Equal(t, "163840", byDType[1]["bytes_per_token"].(json.Number).String())
	fp16, _ := byDType[0]["gpus_needed"].(json.Number).Int64()
	fp8, _ := byDType[1]["gpus_needed"].(json.Number).Int64()
	assert.Equal(t, int64(464), fp16)
	assert.Less(t, fp8, fp16)
}

func TestFleetFixedTensorParallel(t *testing.T) {
	obj := planJSONOf(t, 0, "fleet", "--model", "llama-3.1-8b", "--gpu", "h100", "-tp", "1", "--concurrent", "1k", "--avg-context", "4K")
	assert.Equal(t, false, obj["tensor_parallel_size_chosen"])
	assert.Equal(t, "1", num(t, obj, "tensor_parallel_size"))
	for _, r := range rows(t, obj, "sensitivity_context") {
		assert.Equal(t, "1", r["tensor_parallel_size"].(json.Number).String(), "a given size holds for every row")
	}
}

func TestFleetTable(t *testing.T) {
	code, out, errOut := runKV("fleet", "--model", "llama-3.1-70b", "--gpu", "h100", "--concurrent", "10000", "--avg-context", "8k")
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{
		"10,000 conversations x 8,000 tokens on average, llama-3.1-70b on h100-80gb",
		"GPUs needed",
		"464",
		"58 x 8",
		"chosen: fewest GPUs",
		"sensitivity to the average context",
		"128k",
		"sensitivity to the KV cache dtype",
		"fp8_e4m3",
		"assumptions:",
		"tensor parallel size 8 chosen",
	} {
		assert.Contains(t, out, want)
	}
}

func TestFleetDoesNotFit(t *testing.T) {
	code, out, errOut := runKV("fleet", "--model", "llama-3.1-405b", "--gpu", "rtx-4090", "-tp", "1", "--concurrent", "10", "--avg-context", "1k")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "does not fit")
	assert.Contains(t, errOut, "no room for KV cache")
	obj := planJSONOf(t, 1, "fleet", "--model", "llama-3.1-405b", "--gpu", "rtx-4090", "-tp", "1", "--concurrent", "10", "--avg-context", "1k")
	assert.Nil(t, obj["gpus_needed"])
	assert.Equal(t, false, obj["fits"])
}

func TestFleetBadValues(t *testing.T) {
	base := []string{"fleet", "--model", "llama-3.1-8b", "--gpu", "h100"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no concurrent", append(base, "--avg-context", "8k"), "--concurrent is required"},
		{"no context", append(base, "--concurrent", "10"), "--avg-context is required"},
		{"zero concurrent", append(base, "--concurrent", "0", "--avg-context", "8k"), "--concurrent must be positive"},
		{"bad concurrent", append(base, "--concurrent", "ten", "--avg-context", "8k"), "-concurrent"},
		{"bad context", append(base, "--concurrent", "10", "--avg-context", "8q"), "-avg-context"},
		{"negative context", append(base, "--concurrent", "10", "--avg-context", "-8k"), "-avg-context"},
		{"auto length", append(base, "--concurrent", "10", "--avg-context", "8k", "--max-model-len", "auto"), "auto"},
		{"unknown model", []string{"fleet", "--model", "qwen3-30b", "--gpu", "h100", "--concurrent", "10", "--avg-context", "8k"}, "qwen3-32b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runKV(append(tt.args, "--json")...)
			assert.Equal(t, 2, code, errOut)
			assert.Empty(t, out)
			assert.Contains(t, errOut, tt.want)
		})
	}
}

// --max-model-len bounds the fleet: a longer average is refused, longer rows are not
// planned, and the header says the length.
func TestFleetHonoursMaxModelLen(t *testing.T) {
	obj := planJSONOf(t, 0, "fleet", "--model", "llama-3.1-8b", "--gpu", "h100", "--concurrent", "1000", "--avg-context", "8k", "--max-model-len", "32k")
	assert.Equal(t, "32000", num(t, obj, "max_model_len"))
	assert.Equal(t, true, obj["max_model_len_given"])
	ctx := rows(t, obj, "sensitivity_context")
	require.Len(t, ctx, 4)
	assert.Nil(t, ctx[2]["above_max_model_len"], "32k is within 32k")
	assert.Equal(t, true, ctx[3]["above_max_model_len"], "128k is above 32k")
	code, out, errOut := runKV("fleet", "--model", "llama-3.1-8b", "--gpu", "h100", "--concurrent", "1000", "--avg-context", "8k", "--max-model-len", "32k")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, ", max-model-len 32,000\n")
	assert.Contains(t, out, "above --max-model-len")
}

// An 8B model fits one H100: the fleet keeps it on one GPU per replica, and says which
// size would need fewer GPUs and by how much.
func TestFleetKeepsASmallModelOnOneGPU(t *testing.T) {
	obj := planJSONOf(t, 0, "fleet", "--model", "llama-3-8b", "--gpu", "h100", "--concurrent", "10k", "--avg-context", "8k")
	assert.Equal(t, "1", num(t, obj, "tensor_parallel_size"))
	assert.Equal(t, "179", num(t, obj, "gpus_needed"))
	assert.Equal(t, "4", num(t, obj, "fewest_gpus_tensor_parallel_size"))
	assert.Equal(t, "152", num(t, obj, "fewest_gpus"))
	code, out, _ := runKV("fleet", "--model", "llama-3-8b", "--gpu", "h100", "--concurrent", "10k", "--avg-context", "8k")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "chosen; 4 would need 152 GPUs, 15% fewer, under the 20% that pays for tensor parallelism")
}
