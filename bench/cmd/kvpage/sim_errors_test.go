package main

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/bench/sim"
	"github.com/kvpage/kvpage/blocks/sizing"
)

// applyTiers' refusal of a hybrid row whose bytes per token cannot be sized keeps
// sim.ErrInvalidConfig in the command's error (before, %v dropped it from the chain),
// and stays a usage error: exit status 2. No flags reach it (Scheme.Validate sizes the
// same layers first), so the test replaces the sizing.
func TestSimHostRAMTokenBytesErrorIsTyped(t *testing.T) {
	defer func(f func(string, sizing.DType, int) (int64, error)) { hybridTokenBytes = f }(hybridTokenBytes)
	hybridTokenBytes = func(model string, d sizing.DType, tp int) (int64, error) {
		return 0, fmt.Errorf("%w: %s at tp %d", sim.ErrInvalidConfig, model, tp)
	}
	args := []string{"--model", "qwen3-next-80b-a3b", "--schemes", "hybrid", "--hybrid-layouts", "uniform", "--workload", "conversation",
		"--prefix-sharing", "on", "--num-prompts", "10", "--kv-budget-tokens", "24000", "--host-ram", "8GiB", "--block-size-sweep", "",
		"--no-charts", "--no-progress", "--json"}
	var out, errOut bytes.Buffer
	err := commands["sim"].run(args, &out, &errOut)
	require.Error(t, err)
	assert.ErrorIs(t, err, sim.ErrInvalidConfig)
	var ue *usageError
	assert.ErrorAs(t, err, &ue)
	assert.Equal(t, "--host-ram: sim: invalid configuration: qwen3-next-80b-a3b at tp 1", err.Error())
	code, _, stderr := runKV(append([]string{"sim"}, args...)...)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "--host-ram: qwen3-next-80b-a3b at tp 1\nsee kvpage sim --help")
}
