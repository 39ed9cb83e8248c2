package bench

import (
	"syscall"
	"testing"
	"time"
)

// This machine is shared: while other jobs run, a benchmark's wall-clock time includes the
// time it sat descheduled, and ns/block can read several times the real cost. The pool
// benchmarks therefore also report cpu-ns/block, the process's CPU time (user + system,
// from getrusage) per block, which counts only the time the benchmark actually ran. On an
// idle machine the two agree; when they differ, the load is the reason.

// cpuTime returns the CPU time the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPUPerBlock reports the CPU time used since start per block, when every iteration
// handled perOp blocks.
func reportCPUPerBlock(b *testing.B, start time.Duration, perOp int) {
	used := cpuTime() - start
	if start == 0 || used <= 0 {
		return // getrusage unavailable: report nothing rather than a wrong figure
	}
	b.ReportMetric(float64(used.Nanoseconds())/float64(b.N)/float64(perOp), "cpu-ns/block")
}
