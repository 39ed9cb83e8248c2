package bench

import "math"

// SplitMix64 is the random source of the reference workloads (../shared/workloads.md):
// a 64-bit state advanced by the golden-ratio constant and mixed. Every workload draws from
// it in a fixed order, so that any implementation can replay the same work bit for bit.
type SplitMix64 struct{ state uint64 }

// NewSplitMix64 returns a generator seeded with seed (the workloads use 42).
func NewSplitMix64(seed uint64) *SplitMix64 { return &SplitMix64{state: seed} }

// Next returns the next 64-bit value.
func (r *SplitMix64) Next() uint64 {
	r.state += 0x9E3779B97F4A7C15
	z := r.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Token returns a token ID in [0, 128000), the vocabulary of Llama 3.
func (r *SplitMix64) Token() int32 { return int32(r.Next() % 128000) }

// Unit returns a float64 in [0, 1) from the top 53 bits of Next.
func (r *SplitMix64) Unit() float64 { return float64(r.Next()>>11) * 0x1p-53 }

// Zipf draws 0-based indices from a Zipf distribution over n items with exponent s:
// item k (1-based) has weight 1/k^s.
type Zipf struct{ cdf []float64 }

// NewZipf builds the cumulative distribution for n items with exponent s.
func NewZipf(n int, s float64) *Zipf {
	cdf := make([]float64, n)
	sum := 0.0
	for k := 1; k <= n; k++ {
		sum += 1 / math.Pow(float64(k), s)
		cdf[k-1] = sum
	}
	for i := range cdf {
		cdf[i] /= sum
	}
	return &Zipf{cdf: cdf}
}

// Draw takes u = r.Unit() and returns the first index i with u < cdf[i] (the last index if
// rounding leaves none).
func (z *Zipf) Draw(r *SplitMix64) int {
	u := r.Unit()
	for i, c := range z.cdf {
		if u < c {
			return i
		}
	}
	return len(z.cdf) - 1
}
