package evict

import "cmp"

// MRU evicts the candidate with the newest LastAccess first, ties broken by smallest key.
//
// It suits looping scans, where the block just used is the one needed last. It is a binary
// heap ordered by (LastAccess descending, Key ascending): Add, Remove and Victim are
// O(log n).
type MRU[K cmp.Ordered] struct {
	h rankHeap[K]
	v verifier
}

// NewMRU returns an empty MRU policy.
func NewMRU[K cmp.Ordered]() *MRU[K] { return &MRU[K]{h: newRankHeap[K]()} }

// Name returns "mru".
func (p *MRU[K]) Name() string { return "mru" }

// Add makes e.Key a candidate ordered by e.LastAccess, newest first.
func (p *MRU[K]) Add(e Entry[K]) {
	// ^t turns the min-heap into newest first while keeping the key tie-break ascending.
	p.h.push(e.Key, ^e.LastAccess, 0)
	if checking {
		p.v.after(p.CheckInvariants)
	}
}

// Remove withdraws key and reports whether it was a candidate.
func (p *MRU[K]) Remove(key K) bool {
	ok := p.h.remove(key)
	if checking {
		p.v.after(p.CheckInvariants)
	}
	return ok
}

// Victim pops the most recently used candidate.
func (p *MRU[K]) Victim() (K, bool) {
	k, ok := p.h.pop()
	if checking {
		p.v.after(p.CheckInvariants)
	}
	return k, ok
}

// Len is the number of candidates.
func (p *MRU[K]) Len() int { return p.h.len() }

// Reset drops every candidate.
func (p *MRU[K]) Reset() { p.h.reset() }

// CheckInvariants verifies the heap order and the key index.
func (p *MRU[K]) CheckInvariants() error { return p.h.check() }
