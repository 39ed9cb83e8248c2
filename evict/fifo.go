package evict

import "github.com/kvpage/kvpage/internal/invariant"

// fifo is the policy NewFIFO returns.
type fifo struct {
	h   rankHeap
	seq uint64
	chk checker
}

// NewFIFO returns an empty FIFO policy.
//
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
func NewFIFO(capacity int) (Policy, error) {
	if err := checkCapacity("fifo", capacity); err != nil {
		return nil, err
	}
	return &fifo{h: newRankHeap(capacity)}, nil
}

// Name returns "fifo".
func (p *fifo) Name() string { return "fifo" }

// Add makes e.Key the newest candidate.
func (p *fifo) Add(e Entry) {
	p.seq++
	p.h.push(e.Key, p.seq, 0)
	if invariant.Enabled {
		p.chk.after(p.check)
	}
}

// Remove withdraws key and reports whether it was a candidate.
func (p *fifo) Remove(key int32) bool {
	ok := p.h.remove(key)
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return ok
}

// Victim pops the candidate that arrived first.
func (p *fifo) Victim() (int32, bool) {
	k, ok := p.h.pop()
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return k, ok
}

// Restore undoes the latest Victim, which returned key (Restorer): key is a candidate
// again with the Add number it had.
func (p *fifo) Restore(key int32) {
	p.h.restore(key)
	if invariant.Enabled {
		p.chk.after(p.check)
	}
}

// Len is the number of candidates.
func (p *fifo) Len() int { return p.h.len() }

// Reset drops every candidate.
func (p *fifo) Reset() { p.h.reset(); p.seq = 0 }

// CheckInvariants verifies the heap order and the key index.
func (p *fifo) check() error { return p.h.check() }
