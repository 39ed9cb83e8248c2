package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks/sizing"
)

// On a T4 or V100 (compute capability 7.x) plan runs the model as vLLM's --dtype auto
// does there: gemma-2-9b, which refuses fp16, in fp32 (688,128 B of KV a token, 32 bits
// a parameter: twice an A100's), llama-3.1-8b in fp16 (the same bytes as bf16), and the
// assumption line says why. --dtype bfloat16 there exits 2 with sizing.ErrDTypeNotOnGPU,
// as vLLM refuses to start; fleet-sim refuses it too.
func TestPlanOnPreAmpereGPUs(t *testing.T) {
	obj := planJSONOf(t, 0, "plan", "--model", "gemma-2-9b", "--gpu", "t4", "--max-model-len", "4k", "--weights", "1GiB")
	assert.Equal(t, "fp32", obj["kv_cache_dtype"])
	assert.Equal(t, "688128", num(t, obj, "bytes_per_token"))
	var lines []string
	for _, a := range obj["assumptions"].([]any) {
		lines = append(lines, a.(string))
	}
	assert.Contains(t, strings.Join(lines, "\n"),
		"kv cache dtype fp32: --kv-cache-dtype auto, the data type vLLM runs the model in on t4: compute capability 7.5 runs no bf16, so --dtype auto runs it in fp32")
	obj = planJSONOf(t, 0, "plan", "--model", "gemma-2-9b", "--gpu", "a100", "--max-model-len", "4k", "--weights", "1GiB")
	assert.Equal(t, "344064", num(t, obj, "bytes_per_token"))

	obj = planJSONOf(t, 0, "plan", "--model", "llama-3.1-8b", "--gpu", "v100", "--max-model-len", "4k")
	assert.Equal(t, "fp16", obj["kv_cache_dtype"])
	assert.Equal(t, "131072", num(t, obj, "bytes_per_token"))
	assert.Equal(t, "16060522496", num(t, obj, "weights_bytes"))

	for _, args := range [][]string{
		{"plan", "--model", "llama-3.1-8b", "--gpu", "t4", "--dtype", "bfloat16"},
		{"fleet-sim", "--gpu", "v100-16gb", "--dtype", "bfloat16", "--workload", "sysprompt", "--servers", "1"},
	} {
		var out, errOut bytes.Buffer
		err := commands[args[0]].run(args[1:], &out, &errOut)
		var ue *usageError
		require.ErrorAs(t, err, &ue, "%v", args)
		require.ErrorIs(t, err, sizing.ErrDTypeNotOnGPU, "%v", args)
		assert.ErrorContains(t, err, "needs compute capability 8.0 or later", "%v", args)
	}
}
