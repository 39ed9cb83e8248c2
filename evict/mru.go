package evict

import "github.com/kvpage/kvpage/internal/invariant"

// mru is the policy NewMRU returns.
type mru struct {
	h   rankHeap
	chk checker
}

// NewMRU returns an empty MRU policy.
//
// MRU evicts the candidate with the newest LastAccess first, ties broken by smallest key.
//
// It suits looping scans, where the block just used is the one needed last. It is a binary
// heap ordered by (LastAccess descending, Key ascending): Add, Remove and Victim are
// O(log n).
func NewMRU(capacity int) (Policy, error) {
	if err := checkCapacity("mru", capacity); err != nil {
		return nil, err
	}
	return &mru{h: newRankHeap(capacity)}, nil
}

// Name returns "mru".
func (p *mru) Name() string { return "mru" }

// Add makes e.Key a candidate ordered by e.LastAccess, newest first.
func (p *mru) Add(e Entry) {
	// ^t turns the min-heap into newest first while keeping the key tie-break ascending.
	p.h.push(e.Key, ^e.LastAccess, 0)
	if invariant.Enabled {
		p.chk.after(p.check)
	}
}

// Remove withdraws key and reports whether it was a candidate.
func (p *mru) Remove(key int32) bool {
	ok := p.h.remove(key)
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return ok
}

// Victim pops the most recently used candidate.
func (p *mru) Victim() (int32, bool) {
	k, ok := p.h.pop()
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return k, ok
}

// Len is the number of candidates.
func (p *mru) Len() int { return p.h.len() }

// Reset drops every candidate.
func (p *mru) Reset() { p.h.reset() }

// CheckInvariants verifies the heap order and the key index.
func (p *mru) check() error { return p.h.check() }
