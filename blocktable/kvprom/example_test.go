package kvprom_test

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The scheduler goroutine publishes after its steps; Prometheus scrapes the collector from
// its own goroutine (here: promhttp.HandlerFor(reg, ...) on a server's /metrics).
func Example() {
	pool, _ := blocks.New(65, blocks.WithNullBlock())
	m, _ := blocktable.New(blocktable.Config{Pool: pool, BlockSize: 16})
	var cell blocktable.StatsCell
	reg := prometheus.NewRegistry()
	reg.MustRegister(kvprom.New(&cell, prometheus.Labels{"model_name": "llama"}))

	_, _ = m.Admit(1, &blocktable.Request{Prompt: make([]int32, 100)}) // 7 of 64 blocks
	cell.Publish(m)                                                    // on the scheduler goroutine

	usage, _ := reg.Gather()
	for _, f := range usage {
		if f.GetName() == "vllm:kv_cache_usage_perc" {
			fmt.Printf("%s %.4f\n", f.GetName(), f.GetMetric()[0].GetGauge().GetValue())
		}
	}
	n, _ := testutil.GatherAndCount(reg, "vllm:num_requests_running")
	fmt.Println("series of vllm:num_requests_running:", n)
	// Output:
	// vllm:kv_cache_usage_perc 0.1094
	// series of vllm:num_requests_running: 1
}
