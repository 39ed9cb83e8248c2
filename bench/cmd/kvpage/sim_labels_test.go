package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/bench/sim"
	"github.com/kvpage/kvpage/internal/invariant"
)

// In an fp8 run every row's label says kv=fp8_e4m3, the contiguous and paged rows' as
// the hybrid rows' (before, only the hybrid rows' did), in the JSON and the table.
func TestSimEveryRowNamesItsKVDType(t *testing.T) {
	args := []string{"sim", "--model", "qwen3-next-80b-a3b", "--schemes", "orca-max,paged,hybrid", "--hybrid-layouts", "uniform",
		"--kv-cache-dtype", "fp8", "--kv-budget-tokens", "24000", "--num-prompts", "10", "--block-size-sweep", "", "--no-charts", "--no-progress"}
	code, out, errOut := runKV(append(args, "--json")...)
	require.Zero(t, code, errOut)
	var rep sim.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Schemes, 5)
	for _, row := range rep.Schemes {
		assert.Equal(t, 1, strings.Count(row.Label, " kv=fp8_e4m3"), row.Label)
	}
	code, out, errOut = runKV(args...)
	require.Zero(t, code, errOut)
	for _, l := range []string{"orca-max kv=fp8_e4m3 ", "paged/16 kv=fp8_e4m3 ", "paged/16 kv=fp8_e4m3+lru ", "hybrid/uniform kv=fp8_e4m3 ", "hybrid/uniform kv=fp8_e4m3+lru "} {
		assert.Contains(t, out, "\n"+l)
	}
}

// The default run's output is what it was: its data type is the default model's bf16,
// which no label names, and naming it (bf16, auto) changes no byte. The rows' labels
// are the ones sim.Scheme gives without a data type.
func TestSimDefaultOutputNamesNoKVDType(t *testing.T) {
	args := []string{"sim", "--num-prompts", "300", "--no-charts", "--no-progress"}
	if invariant.Enabled {
		// -race and kvinvariants builds re-check every invariant at every step over the
		// whole pool: the default memory and block-size sweep take tens of minutes there
		// (CI's -race pass timed out on it). A small pool keeps every row and label.
		args = append(args, "--kv-budget-tokens", "6k", "--num-prompts", "60")
	}
	code, def, errOut := runKV(args...)
	require.Zero(t, code, errOut)
	assert.NotContains(t, def, "kv=")
	for _, d := range []string{"bf16", "auto"} {
		code, out, errOut := runKV(append(args, "--kv-cache-dtype", d)...)
		require.Zero(t, code, errOut)
		assert.Equal(t, def, out, d)
	}
	code, out, errOut := runKV(append(args, "--json")...)
	require.Zero(t, code, errOut)
	var rep sim.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.NotEmpty(t, rep.Schemes)
	for _, row := range rep.Schemes {
		s := sim.Scheme{Name: row.Name, BlockSize: row.BlockSize, PrefixSharing: row.PrefixSharing}
		if row.PrefixSharing {
			s.Eviction = row.Eviction
		}
		assert.Equal(t, s.Label(), row.Label)
	}
}
