// Package bench holds kvpage's reference workloads and benchmarks: W1 (allocate/free churn),
// W2 (a full-hit prefix lookup), W3 (shared system prompts under memory pressure), W4 (W3 on
// a hybrid full-attention plus sliding-window model) and W5 (W3 with a device too small for
// its prompts and a host tier), each defined bit for bit in ../shared/workloads.md and
// bench/README.md, with their check values asserted in tests; the benchmarks behind every
// figure in bench/README.md; the simulator (bench/sim); and the kvpage command
// (bench/cmd/kvpage).
//
// The exported part is the workloads' generators and parameters, so that the simulator and
// other programs draw exactly the same traces. They are deterministic (SplitMix64 seeded
// with Seed) and not safe for concurrent use; each benchmark builds its own.
//
// A new workload goes in its own file here with its definition in bench/README.md, a test
// that pins its check values, and a benchmark that reports its metrics with b.ReportMetric.
package bench
