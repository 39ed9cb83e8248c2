package evict

import (
	"cmp"
	"math"
)

// Scored is a policy built from a caller's scoring function, for trying out new ideas
// without writing a policy: Victim pops the candidate with the smallest score, ties broken
// by smallest key.
//
// The score is computed once, when the candidate is added, and is fixed until it is added
// again: a score that should change with time must be written as a time-free rank (LFU's
// score is an example). Scores compare as numbers, with -0 equal to +0; a NaN score ranks
// below every other score, so a candidate scored NaN is evicted first. Add, Remove and
// Victim are O(log n) plus one call of the function per Add; Scored allocates nothing the
// function does not.
type Scored[K cmp.Ordered] struct {
	name  string
	score func(Entry[K]) float64
	h     rankHeap[K]
	v     verifier
}

// NewScored returns an empty policy named name (as Name will report it; "scored" when
// empty) that ranks candidates by score(e), smallest evicted first. score must be
// deterministic (a function of the entry and of logical clocks only) for runs to be
// reproducible.
func NewScored[K cmp.Ordered](name string, score func(Entry[K]) float64) *Scored[K] {
	if name == "" {
		name = "scored"
	}
	return &Scored[K]{name: name, score: score, h: newRankHeap[K]()}
}

// Name returns the name given to NewScored.
func (p *Scored[K]) Name() string { return p.name }

// Add makes e.Key a candidate ranked by score(e).
func (p *Scored[K]) Add(e Entry[K]) {
	p.h.push(e.Key, orderedBits(p.score(e)), 0)
	if checking {
		p.v.after(p.CheckInvariants)
	}
}

// Remove withdraws key and reports whether it was a candidate.
func (p *Scored[K]) Remove(key K) bool {
	ok := p.h.remove(key)
	if checking {
		p.v.after(p.CheckInvariants)
	}
	return ok
}

// Victim pops the candidate with the smallest score.
func (p *Scored[K]) Victim() (K, bool) {
	k, ok := p.h.pop()
	if checking {
		p.v.after(p.CheckInvariants)
	}
	return k, ok
}

// Len is the number of candidates.
func (p *Scored[K]) Len() int { return p.h.len() }

// Reset drops every candidate.
func (p *Scored[K]) Reset() { p.h.reset() }

// CheckInvariants verifies the heap order and the key index.
func (p *Scored[K]) CheckInvariants() error { return p.h.check() }

// orderedBits maps a float64 to a uint64 with the same order: NaN first, then -Inf up to
// +Inf, with -0 and +0 equal.
func orderedBits(f float64) uint64 {
	if math.IsNaN(f) {
		return 0
	}
	if f == 0 {
		f = 0 // -0 becomes +0
	}
	b := math.Float64bits(f)
	if b>>63 != 0 {
		return ^b // negative: larger magnitude must rank lower
	}
	return b | 1<<63
}
