package sim

import (
	"testing"
)

// BenchmarkPagedShareGPT100k runs 100,000 ShareGPT-like requests through the paged scheme
// (block size 16) on the default comparison's memory (Llama 3 8B on an 80 GB H100). One
// iteration is the whole trace; req/s is requests simulated per second of wall time.
func BenchmarkPagedShareGPT100k(b *testing.B) {
	benchmarkScheme(b, 100_000, Scheme{Kind: Paged, BlockSize: 16})
}

// BenchmarkPagedSharingShareGPT100k is the same with prefix sharing (LRU eviction).
func BenchmarkPagedSharingShareGPT100k(b *testing.B) {
	benchmarkScheme(b, 100_000, Scheme{Kind: Paged, BlockSize: 16, PrefixSharing: true})
}

// BenchmarkOrcaOracleShareGPT100k is the contiguous scheme with the first-fit arena.
func BenchmarkOrcaOracleShareGPT100k(b *testing.B) {
	benchmarkScheme(b, 100_000, Scheme{Kind: OrcaOracle})
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
	for b.Loop() {
		if res, err = Simulate(p.Requests, cfg, s); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(p.Requests))*float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(res.Shares.Tokens, "token-util")
	b.ReportMetric(float64(res.TotalSteps), "steps")
}
