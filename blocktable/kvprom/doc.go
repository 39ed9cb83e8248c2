// Package kvprom exports a kvpage Manager's statistics to Prometheus, under vLLM's metric
// names where vLLM has one, so that dashboards and alerts written for vLLM read a kvpage
// server unchanged:
//
//	vllm:prefix_cache_queries_total  counter  prompt tokens looked up (fresh admissions)
//	vllm:prefix_cache_hits_total     counter  of them, tokens found cached
//	vllm:kv_cache_usage_perc         gauge    blocks held by requests / usable blocks (0 to 1)
//	vllm:num_preemptions_total       counter  preemptions
//	vllm:num_requests_running        gauge    running sequences
//
// and kvpage's own under the kvpage_ prefix: re-hits of preempted requests apart from the
// hits above (kvpage_prefix_cache_resumed_queries_total, ..._resumed_hits_total), free and
// cached-evictable blocks apart (kvpage_kv_cache_free_blocks, kvpage_kv_cache_evictable_blocks,
// kvpage_kv_cache_cached_blocks, kvpage_kv_cache_blocks), evictions, swapped sequences and
// refused admissions.
//
// # Concurrency
//
// The Manager is driven by one goroutine and Prometheus scrapes from another, so the
// collector never touches the Manager: the scheduler goroutine publishes into a
// blocktable.StatsCell (lock-free, allocation-free) and the collector reads the cell.
// Scrapes see the last published snapshot.
//
// It is its own package so that a server embedding kvpage without Prometheus pulls in
// none of client_golang. A new metric goes in collector.go's metric table.
package kvprom
