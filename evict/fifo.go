package evict

import "cmp"

// FIFO evicts candidates in the order in which they became candidates: the key whose
// current candidacy began with the earliest Add goes first, whatever its LastAccess.
//
// Precisely: FIFO numbers every Add call 1, 2, 3, ...; a candidate's rank is the number of
// the Add that made it a candidate; Victim pops the smallest rank. Adding a key that is
// already a candidate gives it a new number (it moves to the back), and a key that is
// removed and added again (a hit, then a release) also starts over at the back. Ranks are
// unique, so FIFO never needs the key tie-break.
//
// In a prefix cache this differs from LRU in one case: a radix-tree parent that becomes an
// evictable leaf long after its last use is last in FIFO and first in LRU. FIFO is a heap
// keyed by the Add number: Add, Remove and Victim are O(log n).
type FIFO[K cmp.Ordered] struct {
	h   rankHeap[K]
	seq uint64
	v   verifier
}

// NewFIFO returns an empty FIFO policy.
func NewFIFO[K cmp.Ordered]() *FIFO[K] { return &FIFO[K]{h: newRankHeap[K]()} }

// Name returns "fifo".
func (p *FIFO[K]) Name() string { return "fifo" }

// Add makes e.Key the newest candidate.
func (p *FIFO[K]) Add(e Entry[K]) {
	p.seq++
	p.h.push(e.Key, p.seq, 0)
	if checking {
		p.v.after(p.CheckInvariants)
	}
}

// Remove withdraws key and reports whether it was a candidate.
func (p *FIFO[K]) Remove(key K) bool {
	ok := p.h.remove(key)
	if checking {
		p.v.after(p.CheckInvariants)
	}
	return ok
}

// Victim pops the candidate that arrived first.
func (p *FIFO[K]) Victim() (K, bool) {
	k, ok := p.h.pop()
	if checking {
		p.v.after(p.CheckInvariants)
	}
	return k, ok
}

// Len is the number of candidates.
func (p *FIFO[K]) Len() int { return p.h.len() }

// Reset drops every candidate.
func (p *FIFO[K]) Reset() { p.h.reset(); p.seq = 0 }

// CheckInvariants verifies the heap order and the key index.
func (p *FIFO[K]) CheckInvariants() error { return p.h.check() }
