package evict

import (
	"github.com/kvpage/kvpage/internal/invariant"
	"math"
)

// scored is the policy NewScored returns.
type scored struct {
	name  string
	score func(Entry) float64
	h     rankHeap
	chk   checker
}

// NewScored returns an empty policy named name (as Name will report it; "scored" when
// empty) that ranks candidates by score(e), smallest evicted first. score must be
// deterministic (a function of the entry and of logical clocks only) for runs to be
// reproducible.
//
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
func NewScored(capacity int, name string, score func(Entry) float64) (Policy, error) {
	if name == "" {
		name = "scored"
	}
	if err := checkCapacity(name, capacity); err != nil {
		return nil, err
	}
	if score == nil {
		return nil, &ArgumentError{Policy: name, What: "score"}
	}
	return &scored{name: name, score: score, h: newRankHeap(capacity)}, nil
}

// Name returns the name given to NewScored.
func (p *scored) Name() string { return p.name }

// Add makes e.Key a candidate ranked by score(e).
func (p *scored) Add(e Entry) {
	p.h.push(e.Key, orderedBits(p.score(e)), 0)
	if invariant.Enabled {
		p.chk.after(p.check)
	}
}

// Remove withdraws key and reports whether it was a candidate.
func (p *scored) Remove(key int32) bool {
	ok := p.h.remove(key)
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return ok
}

// Victim pops the candidate with the smallest score.
func (p *scored) Victim() (int32, bool) {
	k, ok := p.h.pop()
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return k, ok
}

// Len is the number of candidates.
func (p *scored) Len() int { return p.h.len() }

// Reset drops every candidate.
func (p *scored) Reset() { p.h.reset() }

// CheckInvariants verifies the heap order and the key index.
func (p *scored) check() error { return p.h.check() }

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
