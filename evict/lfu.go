package evict

import (
	"github.com/kvpage/kvpage/internal/invariant"
	"math"
	"math/bits"
)

// lfu is the policy NewLFU returns.
type lfu struct {
	h        rankHeap
	halfLife uint64
	chk      checker
}

// NewLFU returns an empty LFU policy whose counts halve every halfLife ticks; 0 means
// DefaultHalfLife.
//
// DefaultHalfLife is the LFU policy's default half-life, in ticks of the logical clock.
const DefaultHalfLife = 4096

// LFU evicts the candidate with the smallest aged use count, so that blocks used often stay
// and blocks that were hot long ago eventually leave.
//
// The exact rule. A candidate's count is c = Hits + 1 (+1 so that a block never reused still
// counts). Counts decay continuously with a half-life of H ticks of the logical clock: at
// time now the aged count is
//
//	c · 2^(−(now − LastAccess) / H)
//
// so a count halves every H ticks since the block's last use. LFU evicts the smallest aged
// count. Because every candidate decays at the same rate, comparing aged counts at any time
// gives the same answer as comparing the time-free score
//
//	score = LastAccess + ⌊H · log₂ c⌋
//
// which is what LFU orders by: (score, LastAccess, Key), ascending. log₂ is computed in
// fixed point with 16 fractional bits by an integer algorithm (no floating point), so the
// order is the same on every machine. Examples with H = 4096: a block hit 7 times (c = 8)
// outranks a block never reused (c = 1) until it is 3·4096 ticks older; with no hits at all
// LFU is exactly LRU.
//
// Why continuous rather than "halve every count every H ticks": periodic halving with
// integer counts makes candidates tie and swap places at every period boundary, so the
// whole set would need re-sorting each period (O(n)); the continuous form keeps one fixed
// order, and Add, Remove and Victim stay O(log n).
func NewLFU(capacity int, halfLife uint64) (Policy, error) {
	if err := checkCapacity("lfu", capacity); err != nil {
		return nil, err
	}
	if halfLife == 0 {
		halfLife = DefaultHalfLife
	}
	return &lfu{h: newRankHeap(capacity), halfLife: halfLife}, nil
}

// Name returns "lfu".
func (p *lfu) Name() string { return "lfu" }

// HalfLife is the number of ticks in which a count halves.
func (p *lfu) HalfLife() uint64 { return p.halfLife }

// Add makes e.Key a candidate ranked by its aged count.
func (p *lfu) Add(e Entry) {
	p.h.push(e.Key, LFUScore(e.LastAccess, e.Hits, p.halfLife), e.LastAccess)
	if invariant.Enabled {
		p.chk.after(p.check)
	}
}

// Remove withdraws key and reports whether it was a candidate.
func (p *lfu) Remove(key int32) bool {
	ok := p.h.remove(key)
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return ok
}

// Victim pops the candidate with the smallest aged count.
func (p *lfu) Victim() (int32, bool) {
	k, ok := p.h.pop()
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return k, ok
}

// Len is the number of candidates.
func (p *lfu) Len() int { return p.h.len() }

// Reset drops every candidate.
func (p *lfu) Reset() { p.h.reset() }

// CheckInvariants verifies the heap order and the key index.
func (p *lfu) check() error { return p.h.check() }

// LFUScore is the time-free rank of LFU: lastAccess + ⌊halfLife · log₂(hits + 1)⌋, with
// log₂ in 16-bit fixed point, saturating at the largest uint64. Smaller is evicted first.
func LFUScore(lastAccess uint64, hits uint32, halfLife uint64) uint64 {
	lg := log2Fixed16(uint64(hits) + 1)
	hi, lo := bits.Mul64(halfLife, lg)
	if hi>>16 != 0 {
		return math.MaxUint64
	}
	bonus := hi<<48 | lo>>16
	s, carry := bits.Add64(lastAccess, bonus, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

// log2Fixed16 returns ⌊log₂ x · 2^16⌋ (to within the truncation of the squaring steps) for
// x ≥ 1, by the classic bit-by-bit method: normalise x to a mantissa m in [1, 2), then
// square m sixteen times, each time reading off one fractional bit. Integer arithmetic
// only, so the result is identical on every platform.
func log2Fixed16(x uint64) uint64 {
	if x <= 1 {
		return 0
	}
	n := bits.Len64(x) - 1 // integer part
	// m in Q31: [2^31, 2^32) stands for [1, 2).
	var m uint64
	if n <= 31 {
		m = x << (31 - n)
	} else {
		m = x >> (n - 31)
	}
	r := uint64(n) << 16
	for bit := uint64(1) << 15; bit != 0; bit >>= 1 {
		m = (m * m) >> 31 // m² in Q31, in [1, 4)
		if m >= 1<<32 {
			m >>= 1
			r |= bit
		}
	}
	return r
}
