package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/bench/sim"
	"github.com/kvpage/kvpage/blocks/sizing"
	"github.com/kvpage/kvpage/evict"
)

// A flag the library refuses is a usage error (exit status 2) that keeps the library's
// typed error in its chain, so that errors.Is finds it on the command's error: badFlag
// wraps with %w. Before, every one formatted the error with %v and dropped it.
func TestFlagErrorsKeepTheLibrarysError(t *testing.T) {
	dir := t.TempDir()
	missing, bad := filepath.Join(dir, "missing.json"), filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"model_type": "tiny", "num_hidden_layers": "many"}`), 0o600))
	for _, c := range []struct {
		args []string
		want error
	}{
		{[]string{"plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--kv-cache-dtype", "fp7"}, sizing.ErrUnknownDType},
		{[]string{"plan", "--model", "no-such-model"}, sizing.ErrUnknownModel},
		{[]string{"plan", "--model", "llama-3.1-8b", "--gpu", "no-such-gpu"}, sizing.ErrUnknownGPU},
		{[]string{"plan", "--config", missing, "--params", "8b"}, fs.ErrNotExist},
		{[]string{"plan", "--config", bad, "--params", "8b"}, sizing.ErrBadConfig},
		{[]string{"plan", "--kv-bytes-per-token", "0", "--weights", "10GB"}, sizing.ErrInvalidArgument},
		{[]string{"sim", "--schemes", "no-such-scheme"}, sim.ErrInvalidConfig},
		{[]string{"sim", "--eviction", "no-such-policy"}, evict.ErrUnknownPolicy},
		{[]string{"sim", "--trace", missing}, fs.ErrNotExist},
		{[]string{"fleet-sim", "--model", "no-such-model"}, sizing.ErrUnknownModel},
	} {
		var out, errOut bytes.Buffer
		cmd, ok := commands[c.args[0]]
		require.True(t, ok, c.args[0])
		err := cmd.run(c.args[1:], &out, &errOut)
		require.Error(t, err, "%v", c.args)
		var ue *usageError
		assert.ErrorAs(t, err, &ue, "%v", c.args)
		assert.ErrorIs(t, err, c.want, "%v: %v", c.args, err)
		code, _, _ := runKV(c.args...)
		assert.Equal(t, 2, code, "%v", c.args)
	}
}
