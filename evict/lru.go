package evict

import "cmp"

// LRU evicts the candidate with the oldest LastAccess first, ties broken by smallest key.
// It is the default policy.
//
// Candidates can arrive out of time order (a parent becomes a leaf with an old LastAccess),
// so LRU keeps a binary heap ordered by (LastAccess, Key) rather than a list ordered by
// arrival: Add, Remove and Victim are O(log n).
type LRU[K cmp.Ordered] struct {
	h rankHeap[K]
	v verifier
}

// NewLRU returns an empty LRU policy.
func NewLRU[K cmp.Ordered]() *LRU[K] { return &LRU[K]{h: newRankHeap[K]()} }

// Name returns "lru".
func (p *LRU[K]) Name() string { return "lru" }

// Add makes e.Key a candidate ordered by e.LastAccess.
func (p *LRU[K]) Add(e Entry[K]) {
	p.h.push(e.Key, e.LastAccess, 0)
	if checking {
		p.v.after(p.CheckInvariants)
	}
}

// Remove withdraws key and reports whether it was a candidate.
func (p *LRU[K]) Remove(key K) bool {
	ok := p.h.remove(key)
	if checking {
		p.v.after(p.CheckInvariants)
	}
	return ok
}

// Victim pops the least recently used candidate.
func (p *LRU[K]) Victim() (K, bool) {
	k, ok := p.h.pop()
	if checking {
		p.v.after(p.CheckInvariants)
	}
	return k, ok
}

// Len is the number of candidates.
func (p *LRU[K]) Len() int { return p.h.len() }

// Reset drops every candidate.
func (p *LRU[K]) Reset() { p.h.reset() }

// CheckInvariants verifies the heap order and the key index.
func (p *LRU[K]) CheckInvariants() error { return p.h.check() }
