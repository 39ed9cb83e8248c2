package evict

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"
)

func TestLog2Fixed16(t *testing.T) {
	assert.Equal(t, uint64(0), log2Fixed16(0))
	assert.Equal(t, uint64(0), log2Fixed16(1))
	for n := range 33 {
		assert.Equal(t, uint64(n)<<16, log2Fixed16(1<<n), "powers of two are exact: 2^%d", n)
	}
	rapid.Check(t, func(t *rapid.T) {
		x := rapid.Uint64Range(1, 1<<32).Draw(t, "x")
		got := float64(log2Fixed16(x)) / 65536
		want := math.Log2(float64(x))
		if got > want+1e-9 || want-got > 4.0/65536 {
			t.Fatalf("log2(%d) = %v, want %v (truncated to 16 bits)", x, got, want)
		}
		if log2Fixed16(x+1) < log2Fixed16(x) {
			t.Fatalf("log2 not monotone at %d", x)
		}
	})
}

// TestLFUScoreIsAgedCount checks the documented equivalence: comparing scores gives the
// same answer as comparing aged counts (Hits+1)·2^(−(now−LastAccess)/H) at any time, when
// the aged counts differ by more than the fixed-point rounding.
func TestLFUScoreIsAgedCount(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := rapid.Uint64Range(1, 10000).Draw(t, "halfLife")
		now := uint64(1 << 40)
		ta := now - rapid.Uint64Range(0, 50000).Draw(t, "ageA")
		tb := now - rapid.Uint64Range(0, 50000).Draw(t, "ageB")
		ha := rapid.Uint32Range(0, 1000).Draw(t, "hitsA")
		hb := rapid.Uint32Range(0, 1000).Draw(t, "hitsB")
		aged := func(last uint64, hits uint32) float64 {
			return math.Log2(float64(hits)+1) - float64(now-last)/float64(h) // log of aged count
		}
		la, lb := aged(ta, ha), aged(tb, hb)
		if math.Abs(la-lb) < 2/float64(h)+1e-3 {
			return // too close to call through rounding
		}
		sa, sb := LFUScore(ta, ha, h), LFUScore(tb, hb, h)
		if (la < lb) != (sa < sb) {
			t.Fatalf("aged log-counts %v, %v but scores %d, %d", la, lb, sa, sb)
		}
	})
}

func TestLFUScoreSaturates(t *testing.T) {
	assert.Equal(t, uint64(math.MaxUint64), LFUScore(math.MaxUint64-5, 7, 100))
	assert.Equal(t, uint64(math.MaxUint64), LFUScore(0, math.MaxUint32, math.MaxUint64))
	assert.Equal(t, uint64(10), LFUScore(10, 0, math.MaxUint64), "no hits, no bonus")
	assert.Equal(t, uint64(10+3*4096), LFUScore(10, 7, 4096))
}
