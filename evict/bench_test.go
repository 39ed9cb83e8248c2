package evict

import (
	"fmt"
	"testing"
)

// BenchmarkPolicy measures one steady-state cache step (Victim, Add of the evicted key,
// Remove of a hit candidate, Add of it again: four operations) for every built-in policy
// at two sizes, to show O(log n) growth and 0 allocs/op:
//
//	go test -run '^$' -bench BenchmarkPolicy ./evict/
func BenchmarkPolicy(b *testing.B) {
	for _, pc := range policyCases() {
		for _, n := range []int{1 << 10, 1 << 17} {
			b.Run(fmt.Sprintf("%s/n=%d", pc.name, n), func(b *testing.B) {
				c := newChurn(pc, n)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					c.step()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(4*b.N), "ns/policy-op")
			})
		}
	}
}

// BenchmarkPreemption measures choosing victims among 256 running sequences.
func BenchmarkPreemption(b *testing.B) {
	running := make([]Candidate, 256)
	for i := range running {
		running[i] = Candidate{ID: uint64(i), Priority: i % 3, Arrival: uint64(i * 31 % 256), Computed: 100 + i*13%500,
			Output: i % 17, Held: 10, Freeable: i % 4}
	}
	dst := make([]int, 0, len(running))
	for _, name := range PreemptionNames() {
		b.Run(name, func(b *testing.B) {
			p, _ := PreemptionByName(name)
			b.ReportAllocs()
			for b.Loop() {
				dst = p.Victims(dst[:0], running, 8)
			}
		})
	}
}
