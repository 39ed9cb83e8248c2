package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/bench/sim"
)

// A --dtype other than bf16 is named in every row's label and in the budget line, whose
// weights it sizes: before, a float32 run's table (a smaller budget, the same labels)
// could not be told from a bf16 run's. bf16 and auto (the default model's bf16) change
// no byte of the output. The pools are a few thousand tokens (--gpu-memory), small
// enough for the -race and kvinvariants builds.
func TestSimNamesANonDefaultDType(t *testing.T) {
	args := []string{"sim", "--schemes", "orca-max,paged", "--block-size-sweep", "", "--num-prompts", "20",
		"--no-charts", "--no-progress"}
	bf16 := append(args, "--gpu-memory", "20GiB")
	code, def, errOut := runKV(bf16...)
	require.Zero(t, code, errOut)
	assert.NotContains(t, def, "dtype=")
	assert.Contains(t, def, ": llama-3-8b (bf16 KV cache) on ")
	for _, d := range []string{"bfloat16", "auto"} {
		code, out, errOut := runKV(append(bf16, "--dtype", d)...)
		require.Zero(t, code, errOut)
		assert.Equal(t, def, out, d)
	}

	f32 := append(args, "--gpu-memory", "36GiB", "--dtype", "float32", "--kv-cache-dtype", "bf16")
	code, out, errOut := runKV(f32...)
	require.Zero(t, code, errOut)
	assert.Contains(t, out, ": llama-3-8b in fp32 (bf16 KV cache) on ")
	for _, l := range []string{"orca-max dtype=fp32 ", "paged/16 dtype=fp32 ", "paged/16 dtype=fp32+lru "} {
		assert.Contains(t, out, "\n"+l)
	}
	code, out, errOut = runKV(append(f32, "--json")...)
	require.Zero(t, code, errOut)
	var rep sim.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Schemes, 3)
	for _, row := range rep.Schemes {
		assert.Equal(t, 1, strings.Count(row.Label, " dtype=fp32"), row.Label)
	}

	// float16 names both: the KV cache follows it under --kv-cache-dtype auto.
	code, out, errOut = runKV(append(args, "--gpu-memory", "20GiB", "--dtype", "float16")...)
	require.Zero(t, code, errOut)
	assert.Contains(t, out, ": llama-3-8b in fp16 (fp16 KV cache) on ")
	assert.Contains(t, out, "\npaged/16 dtype=fp16 kv=fp16+lru ")
}
