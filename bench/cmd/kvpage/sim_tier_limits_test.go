package main

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/bench/sim"
	"github.com/kvpage/kvpage/prefix"
)

// Every --host-ram and --disk the simulator would not build is bad input (exit status 2)
// wrapping sim.ErrInvalidConfig, naming the flag and sim.MaxTierBlocks, refused before
// any row runs. The largest sizes --host-ram takes used to give the paged rows two tiers
// capped at prefix.MaxTierCapacity, which the index refused with a prefix.SizeError (exit
// status 1), and a per-class hybrid row a host tier of 2^30 blocks, which ran out of
// memory.
func TestSimTierSizesPastTheLimit(t *testing.T) {
	base := []string{"--prefix-sharing", "on", "--block-size-sweep=", "--num-prompts", "20", "--kv-budget-tokens", "64000", "--no-charts", "--no-progress"}
	for name, args := range map[string][]string{
		"paged, the largest host and disk": {"--schemes", "paged", "--host-ram", "65536TiB", "--disk", "65536TiB"},
		"paged, a host past the limit":     {"--schemes", "paged", "--host-ram", "64TiB"},
		"paged, a disk past the limit":     {"--schemes", "paged", "--host-ram", "8GiB", "--disk", "64TiB"}, // named --disk
		"paged, host and disk together":    {"--schemes", "paged", "--host-ram", "16TiB", "--disk", "17TiB"},
		"hybrid per-class, a huge host":    {"--schemes", "hybrid", "--model", "qwen3-next-80b-a3b", "--hybrid-layouts", "per-class", "--host-ram", "65536TiB"},
		"hybrid uniform, the largest host and disk": {"--schemes", "hybrid", "--model", "qwen3-next-80b-a3b", "--hybrid-layouts", "uniform",
			"--host-ram", "65536TiB", "--disk", "65536TiB"},
	} {
		t.Run(name, func(t *testing.T) {
			err := runSim(append(append([]string{}, base...), args...), io.Discard, io.Discard)
			require.ErrorIs(t, err, sim.ErrInvalidConfig)
			var se *prefix.SizeError
			require.False(t, errors.As(err, &se), "%v", err)
			require.ErrorContains(t, err, "sim.MaxTierBlocks")
			code, _, errOut := runKV(append(append([]string{"sim"}, base...), args...)...)
			require.Equal(t, 2, code, errOut)
			flag := "--host-ram"
			if name == "paged, a disk past the limit" {
				flag = "--disk"
			}
			require.Contains(t, errOut, "kvpage sim: "+flag)
		})
	}
	// 16 TiB of host and 16 TiB of disk is the limit in Llama 3 8B's 2 MiB blocks: valid
	// (resolved, not run: its index would take about 4 GB).
	fs := newFlagSet("sim", simHelp())
	var f simFlags
	f.register(fs)
	require.NoError(t, fs.parse(append(append([]string{}, base...), "--schemes", "paged", "--host-ram", "16TiB", "--disk", "16TiB"), io.Discard))
	r, err := f.resolve()
	require.NoError(t, err)
	require.Equal(t, sim.MaxTierBlocks, r.schemes[0].Tiers.HostBlocks+r.schemes[0].Tiers.DiskBlocks)
}
