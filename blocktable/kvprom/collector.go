package kvprom

import (
	"github.com/kvpage/kvpage/blocktable"
	"github.com/prometheus/client_golang/prometheus"
)

// metric is one exported series: its descriptor, its type and how to read it.
type metric struct {
	name, help string
	kind       prometheus.ValueType
	value      func(s *blocktable.Snapshot) float64
}

var metrics = []metric{
	{"vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens (fresh admissions; resumed ones are in kvpage_prefix_cache_resumed_queries_total).",
		prometheus.CounterValue, func(s *blocktable.Snapshot) float64 { return float64(s.PromptTokens) }},
	{"vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens (fresh admissions).",
		prometheus.CounterValue, func(s *blocktable.Snapshot) float64 { return float64(s.HitTokens) }},
	{"vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage (blocks held by requests over usable blocks; cached blocks nobody holds count as free).",
		prometheus.GaugeValue, usage},
	{"vllm:num_preemptions_total", "Cumulative number of preemptions.",
		prometheus.CounterValue, func(s *blocktable.Snapshot) float64 { return float64(s.Preemptions) }},
	{"vllm:num_requests_running", "Number of sequences running.",
		prometheus.GaugeValue, func(s *blocktable.Snapshot) float64 { return float64(s.Running) }},
	{"kvpage_num_requests_swapped", "Number of sequences swapped out to host memory.",
		prometheus.GaugeValue, func(s *blocktable.Snapshot) float64 { return float64(s.Swapped) }},
	{"kvpage_prefix_cache_resumed_queries_total", "Prompt tokens looked up by preempted requests admitted again.",
		prometheus.CounterValue, func(s *blocktable.Snapshot) float64 { return float64(s.ResumedPromptTokens) }},
	{"kvpage_prefix_cache_resumed_hits_total", "Of them, tokens found cached (mostly the requests' own blocks from before preemption).",
		prometheus.CounterValue, func(s *blocktable.Snapshot) float64 { return float64(s.ResumedHitTokens) }},
	{"kvpage_kv_cache_blocks", "Usable device blocks.",
		prometheus.GaugeValue, func(s *blocktable.Snapshot) float64 { return float64(s.Capacity) }},
	{"kvpage_kv_cache_free_blocks", "Blocks on the free list (holding nothing).",
		prometheus.GaugeValue, func(s *blocktable.Snapshot) float64 { return float64(s.Free) }},
	{"kvpage_kv_cache_evictable_blocks", "Cached blocks no request holds, which eviction can free now.",
		prometheus.GaugeValue, func(s *blocktable.Snapshot) float64 { return float64(s.Evictable) }},
	{"kvpage_kv_cache_cached_blocks", "Blocks in the prefix index (held or not).",
		prometheus.GaugeValue, func(s *blocktable.Snapshot) float64 { return float64(s.Cached) }},
	{"kvpage_prefix_cache_evictions_total", "Cached blocks evicted.",
		prometheus.CounterValue, func(s *blocktable.Snapshot) float64 { return float64(s.Index.Evictions) }},
	{"kvpage_rejected_admissions_total", "Admissions refused for lack of blocks.",
		prometheus.CounterValue, func(s *blocktable.Snapshot) float64 { return float64(s.RejectedAdmissions) }},
}

func usage(s *blocktable.Snapshot) float64 {
	if s.Capacity == 0 {
		return 0
	}
	return float64(s.InUse) / float64(s.Capacity)
}

// Collector is a prometheus.Collector over a StatsCell.
type Collector struct {
	cell  *blocktable.StatsCell
	descs []*prometheus.Desc
}

// New returns a collector of the snapshots published in cell. labels are constant labels
// on every series (vLLM labels its series with model_name and engine).
func New(cell *blocktable.StatsCell, labels prometheus.Labels) *Collector {
	c := &Collector{cell: cell, descs: make([]*prometheus.Desc, len(metrics))}
	for i, m := range metrics {
		c.descs[i] = prometheus.NewDesc(m.name, m.help, nil, labels)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one Load of the cell, so every series of a
// scrape comes from the same publication.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.cell.Load()
	for i, m := range metrics {
		ch <- prometheus.MustNewConstMetric(c.descs[i], m.kind, m.value(&s))
	}
}
