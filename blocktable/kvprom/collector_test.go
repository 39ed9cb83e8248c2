package kvprom_test

import (
	"strings"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvprom"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func newManager(t *testing.T) *blocktable.Manager {
	pool, err := blocks.New(17, blocks.WithNullBlock())
	require.NoError(t, err)
	clock := &evict.Counter{}
	idx, err := prefix.New(pool, 4, prefix.WithClock(clock))
	require.NoError(t, err)
	m, err := blocktable.New(blocktable.Config{Pool: pool, Index: idx, BlockSize: 4, Clock: clock})
	require.NoError(t, err)
	return m
}

func prompt(n int, base int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = base + int32(i)
	}
	return out
}

// The exposition carries vLLM's names and values computed from the Manager's stats.
func TestCollectorExposition(t *testing.T) {
	m := newManager(t)
	var cell blocktable.StatsCell
	_, err := m.Admit(1, &blocktable.Request{Prompt: prompt(13, 1)}) // 4 blocks
	require.NoError(t, err)
	_, err = m.Admit(2, &blocktable.Request{Prompt: prompt(13, 1)}) // hits 3 blocks, 12 tokens
	require.NoError(t, err)
	_, err = m.PreemptSeq(2, blocktable.Recompute)
	require.NoError(t, err)
	_, err = m.Admit(2, &blocktable.Request{Prompt: prompt(13, 1), Resumed: true})
	require.NoError(t, err)
	cell.Publish(m)

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(kvprom.New(&cell, prometheus.Labels{"model_name": "m"})))
	want := `
# HELP vllm:num_preemptions_total Cumulative number of preemptions.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{model_name="m"} 1
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens (fresh admissions).
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{model_name="m"} 12
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens (fresh admissions; resumed ones are in kvpage_prefix_cache_resumed_queries_total).
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{model_name="m"} 26
# HELP kvpage_prefix_cache_resumed_hits_total Of them, tokens found cached (mostly the requests' own blocks from before preemption).
# TYPE kvpage_prefix_cache_resumed_hits_total counter
kvpage_prefix_cache_resumed_hits_total{model_name="m"} 12
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage (blocks held by requests over usable blocks; cached blocks nobody holds count as free).
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} 0.3125
# HELP kvpage_kv_cache_free_blocks Blocks on the free list (holding nothing).
# TYPE kvpage_kv_cache_free_blocks gauge
kvpage_kv_cache_free_blocks{model_name="m"} 11
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"vllm:num_preemptions_total", "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total",
		"kvpage_prefix_cache_resumed_hits_total", "vllm:kv_cache_usage_perc", "kvpage_kv_cache_free_blocks"))
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Equal(t, 14, n)
}
