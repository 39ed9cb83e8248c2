package sim

import (
	"syscall"
	"testing"
	"time"
)

// BenchmarkPagedShareGPT100k runs 100,000 ShareGPT-like requests through the paged scheme
// (block size 16) on the default comparison's memory (Llama 3 8B on an 80 GB H100). One
// iteration is the whole trace; req/s is requests simulated per second of wall time,
// req/cpu-s per second of the process's CPU time.
func BenchmarkPagedShareGPT100k(b *testing.B) {
	benchmarkScheme(b, 100_000, Scheme{Name: Paged, BlockSize: 16})
}

// BenchmarkPagedSharingShareGPT100k is the same with prefix sharing (LRU eviction).
func BenchmarkPagedSharingShareGPT100k(b *testing.B) {
	benchmarkScheme(b, 100_000, Scheme{Name: Paged, BlockSize: 16, PrefixSharing: true})
}

// BenchmarkOrcaOracleShareGPT100k is the contiguous scheme with the first-fit arena.
func BenchmarkOrcaOracleShareGPT100k(b *testing.B) {
	benchmarkScheme(b, 100_000, Scheme{Name: OrcaOracle})
}

func benchmarkScheme(b *testing.B, n int, s Scheme) {
	w, err := LookupWorkload("sharegpt")
	if err != nil {
		b.Fatal(err)
	}
	p := Prepare(w.Generate(n, 42), DefaultMaxModelLen)
	capacity, err := TokenBudget(defaultPlan(b, DefaultMaxModelLen))
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig(capacity)
	b.ReportAllocs()
	var res *Result
	cpu0 := cpuTime()
	for b.Loop() {
		if res, err = Simulate(p.Requests, cfg, s); err != nil {
			b.Fatal(err)
		}
	}
	reqs := float64(len(p.Requests)) * float64(b.N)
	b.ReportMetric(reqs/b.Elapsed().Seconds(), "req/s")
	if used := cpuTime() - cpu0; cpu0 > 0 && used > 0 {
		b.ReportMetric(reqs/used.Seconds(), "req/cpu-s")
	}
	b.ReportMetric(res.Shares.Tokens, "token-util")
	b.ReportMetric(float64(res.TotalSteps), "steps")
}

// cpuTime is the CPU time (user + system) the process has used: on a shared machine a
// benchmark's wall time includes time spent descheduled, its CPU time does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
