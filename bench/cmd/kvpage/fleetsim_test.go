package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFleetSimSmallFleet(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runKV("fleet-sim", "--workload", "sysprompt", "--servers", "2,3", "--requests-per-server", "20", "--charts", dir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "sysprompt: llama-3-8b on rtx-4090: 54328 tokens per server")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2+2*4, out) // memory, header, 2 sizes x 4 policies
	for _, p := range []string{"round-robin", "least-loaded", "prefix", "prefix-load"} {
		require.Contains(t, out, " "+p+" ")
	}
	st, err := os.Stat(filepath.Join(dir, "fleet-sysprompt.png"))
	require.NoError(t, err)
	require.Positive(t, st.Size())
}

func TestFleetSimBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--servers", "0"},
		{"--servers", "x"},
		{"--policies", "random"},
		{"--workload", "nope"},
		{"--weight", "1.5"},
		{"--event-delay", "-1"},
		{"--rate-per-server", "0"},
		{"--gpu", "abacus"},
		{"--open-per-server", "-1"},
		{"--open-per-server", "257"},
	} {
		code, _, errOut := runKV(append([]string{"fleet-sim"}, args...)...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "see kvpage fleet-sim --help")
	}
}

// The conversation workload's open conversations follow --open-per-server x servers: 12
// per server on 4 servers is the trace's fixed 48 (--open-per-server 0) row for row, and
// one per server keeps fewer requests in flight, so fewer complete per step.
func TestFleetSimOpenConversationsScaleWithTheFleet(t *testing.T) {
	rows := func(open string) (string, []string) {
		t.Helper()
		code, out, errOut := runKV("fleet-sim", "--workload", "conversation", "--servers", "4", "--requests-per-server", "30",
			"--policies", "round-robin", "--open-per-server", open)
		require.Equal(t, 0, code, errOut)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 3, out)
		return lines[0], strings.Fields(lines[2])
	}
	head12, with12 := rows("12")
	head0, fixed := rows("0")
	head1, with1 := rows("1")
	require.Contains(t, head12, "; 12 open conversations per server")
	require.Contains(t, head0, "; 48 open conversations at every fleet size")
	require.Contains(t, head1, "; 1 open conversation per server")
	require.Equal(t, fixed, with12, "4 x 12 = 48 open: the same trace")
	// Fields: workload, servers, policy, hit rate, routed hit, imbalance, preemptions,
	// completed/step, steps.
	c1, err := strconv.ParseFloat(with1[7], 64)
	require.NoError(t, err)
	c48, err := strconv.ParseFloat(fixed[7], 64)
	require.NoError(t, err)
	require.Less(t, c1, c48, "4 conversations in flight complete fewer turns per step than 48")
}

// fleet-sim's planner runs the model in --dtype, as plan does: float32 doubles the KV
// cache a token and the weights, and leaves 171,080 tokens of an H100 where bf16 leaves
// 464,692. A value vLLM's --dtype does not take exits 2.
func TestFleetSimDType(t *testing.T) {
	for d, want := range map[string]string{"auto": "464692 tokens per server (the planner, max-model-len 2048)\n",
		"bfloat16": "464692 tokens per server (the planner, max-model-len 2048), --dtype bfloat16\n",
		"float32":  "171080 tokens per server (the planner, max-model-len 2048), --dtype float32\n"} {
		if raceEnabled && d != "float32" {
			continue // each run takes 15 s under -race, and has no concurrency to check
		}
		code, out, errOut := runKV("fleet-sim", "--workload", "sysprompt", "--servers", "1", "--policies", "round-robin",
			"--requests-per-server", "1", "--gpu", "h100", "--dtype", d)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "sysprompt: llama-3-8b on h100: "+want, d)
	}
	code, _, errOut := runKV("fleet-sim", "--dtype", "fp32")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown --dtype value "fp32"; closest names: float, float32`)
}

// fleet-sim sizes each server's KV cache in --kv-cache-dtype, as plan and sim do: fp8
// halves llama-3-8b's 131,072 bytes a token, so an RTX 4090 holds 108,657 tokens where
// auto's bf16 holds 54,328. Before, fleet-sim had no --kv-cache-dtype and every fleet
// was sized in the model's data type. A bad spelling exits 2, with --kv-budget-tokens too.
func TestFleetSimKVCacheDType(t *testing.T) {
	for d, want := range map[string]string{"auto": "54328 tokens per server (the planner, max-model-len 2048)\n",
		"fp8": "108657 tokens per server (the planner, max-model-len 2048), --kv-cache-dtype fp8\n"} {
		if raceEnabled && d != "fp8" {
			continue // a run takes seconds under -race, and has no concurrency to check
		}
		code, out, errOut := runKV("fleet-sim", "--workload", "sysprompt", "--servers", "1", "--policies", "round-robin",
			"--requests-per-server", "1", "--kv-cache-dtype", d)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "sysprompt: llama-3-8b on rtx-4090: "+want, d)
	}
	for _, extra := range [][]string{nil, {"--kv-budget-tokens", "1000"}} {
		code, _, errOut := runKV(append([]string{"fleet-sim", "--kv-cache-dtype", "fp9"}, extra...)...)
		require.Equal(t, 2, code, extra)
		require.Contains(t, errOut, `--kv-cache-dtype: unknown data type "fp9"`, extra)
	}
}
