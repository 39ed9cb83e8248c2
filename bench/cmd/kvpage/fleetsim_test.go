package main

import (
	"os"
	"path/filepath"
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
	} {
		code, _, errOut := runKV(append([]string{"fleet-sim"}, args...)...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "see kvpage fleet-sim --help")
	}
}
