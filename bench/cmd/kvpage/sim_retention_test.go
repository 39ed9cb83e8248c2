package main

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/bench/sim"
	"github.com/kvpage/kvpage/internal/invariant"
)

// The CLI's retention replays are the library's: the same parameters from the flags, the
// same rows, the same figures.
func TestSimRetentionReplaysMatchTheLibrary(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine replay: nothing for the race detector, minutes under it; -tags kvinvariants runs it")
	}
	sessions, events, agCache, flCache, quota := 40, 3000, 64000, 32768, 512
	if invariant.Enabled {
		// Under -race and kvinvariants every index mutation re-checks the whole index:
		// fewer requests over a smaller cache.
		sessions, events, agCache, flCache, quota = 3, 200, 17000, 8192, 128
	}
	code, out, errOut := runKV("sim", "--workload", "agentic", "--num-prompts", strconv.Itoa(sessions), "--kv-budget-tokens", strconv.Itoa(agCache),
		"--session-ttl", "100", "--json")
	require.Zero(t, code, errOut)
	var rep struct {
		Params  sim.AgenticParams `json:"params"`
		Agentic []agenticRowJSON  `json:"agentic"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	p := sim.DefaultAgentic
	p.Sessions, p.Blocks, p.SessionTTL = sessions, agCache/16, 100
	assert.Equal(t, p, rep.Params)
	require.Len(t, rep.Agentic, len(sim.AgenticSchemes), "the default rows are the library's AgenticSchemes")
	for i, sc := range sim.AgenticSchemes {
		want, err := sim.ReplayAgentic(p, sc)
		require.NoError(t, err)
		got := rep.Agentic[i]
		assert.Equal(t, sc.Name, got.Scheme)
		assert.Equal(t, sc.Policy, got.Policy)
		assert.Equal(t, want.HitTokens, got.HitTokens, sc.Name)
		assert.Equal(t, want.PromptTokens, got.PromptTokens, sc.Name)
		assert.Equal(t, want.Recomputed, got.Recomputed, sc.Name)
		assert.Equal(t, want.LongSurvival(), got.LongSurvival, sc.Name)
		assert.Equal(t, want.Evictions, got.Evictions, sc.Name)
	}

	code, out, errOut = runKV("sim", "--workload", "two-tenant", "--num-prompts", strconv.Itoa(events), "--kv-budget-tokens", strconv.Itoa(flCache),
		"--eviction", "lru,s3fifo", "--flood-quota", strconv.Itoa(quota), "--json")
	require.Zero(t, code, errOut)
	var frep struct {
		Flood []floodRowJSON `json:"two_tenant"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &frep))
	require.Len(t, frep.Flood, 4)
	i := 0
	for _, pol := range []string{"lru", "s3fifo"} {
		for _, q := range []bool{false, true} {
			fp := sim.DefaultFlood
			fp.Events, fp.FloodQuota, fp.Policy, fp.Blocks = events, quota, pol, flCache/16
			want, err := sim.ReplayFlood(fp, q)
			require.NoError(t, err)
			got := frep.Flood[i]
			assert.Equal(t, pol, got.Policy)
			assert.Equal(t, want.VictimHits, got.VictimHits, "%s quota %v", pol, q)
			assert.Equal(t, want.VictimTokens, got.VictimTokens)
			assert.Equal(t, want.FloodHits, got.FloodHits)
			i++
		}
	}

	code, out, _ = runKV("sim", "--workload", "two-tenant", "--num-prompts", strconv.Itoa(events), "--kv-budget-tokens", strconv.Itoa(flCache),
		"--flood-quota", strconv.Itoa(quota))
	require.Zero(t, code)
	assert.Contains(t, out, "victim's hit rate")
	assert.Contains(t, out, strconv.Itoa(quota)+" blocks")
}

func TestSimRetentionReplayFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--schemes", "paged"}, "--schemes has no meaning"},
		{[]string{"--retention", "forever"}, "--retention"},
		{[]string{"--session-ttl", "0"}, "--session-ttl"},
		{[]string{"--eviction", "nope"}, "--eviction"},
		{[]string{"--kv-budget-tokens", "8"}, "--kv-budget-tokens"},
		{[]string{"--kv-budget-tokens", "1k"}, "cannot hold one request"},
	} {
		code, _, errOut := runKV(append([]string{"sim", "--workload", "agentic", "--num-prompts", "5"}, tt.args...)...)
		assert.Equal(t, 2, code, "%v: %s", tt.args, errOut)
		assert.Contains(t, errOut, tt.want, tt.args)
	}
	code, _, errOut := runKV("sim", "--workload", "two-tenant", "--flood-quota", "999999")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--flood-quota")
}
