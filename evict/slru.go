package evict

import (
	"fmt"
	"github.com/kvpage/kvpage/internal/invariant"
)

// slru is the policy NewSLRU returns.
type slru struct {
	probation rankHeap
	protected rankHeap
	percent   int
	// undo is, per key Victim returned, what Restore needs to undo that call: the key the
	// call demoted to probation, plus one (0 for none), shifted left once, and 1 when the
	// victim came from the protected segment. 4 bytes per key of capacity.
	undo []uint32
	chk  checker
}

// NewSLRU returns an empty SLRU policy whose protected segment holds at most percent of
// the candidates; percent 0 means DefaultProtectedPercent, and one below 0 or above 100 is
// refused with an *ArgumentError.
//
// ReusedHits is the Entry.Hits from which a block counts as reused: its content was stored
// (one use) and hit at least once since. SLRU protects such blocks and S3FIFO keeps them in
// its main queue; blocks below it are one-hit wonders.
const ReusedHits = 2

// DefaultProtectedPercent is SLRU's default protected share of the candidates.
const DefaultProtectedPercent = 80

// SLRU is segmented LRU: candidates whose content has been reused are protected, and
// one-hit wonders are evicted before them.
//
// The exact rule. A candidate enters the protected segment when e.Hits >= ReusedHits, the
// probation segment otherwise. Both segments are ordered by (LastAccess, Key). The
// protected segment may hold at most ⌊P·n/100⌋ of the n candidates (P, the protected
// percent, is set at construction: DefaultProtectedPercent); after every Add, Remove and
// Victim, while it holds more, its least recently used candidate is demoted to probation,
// where it competes by its own (old) LastAccess. A demoted candidate stays in probation until
// it leaves; added again (after a hit) it starts over. Victim pops the least recently used
// probation candidate, or the least recently used protected one when probation is empty.
//
// Segment sizes are shares of the candidates (the evictable blocks), not of the whole
// cache, because that is all a policy sees. Each operation changes n by one, so at most one
// demotion follows it: Add, Remove and Victim are O(log n).
func NewSLRU(capacity int, percent int) (Policy, error) {
	percent, err := checkShare("slru", capacity, percent, DefaultProtectedPercent)
	if err != nil {
		return nil, err
	}
	return &slru{probation: newRankHeap(capacity), protected: newRankHeap(capacity), percent: percent,
		undo: make([]uint32, capacity)}, nil
}

// Name returns "slru".
func (p *slru) Name() string { return "slru" }

// ProtectedPercent is the protected segment's maximum share of the candidates.
func (p *slru) ProtectedPercent() int { return p.percent }

// Add makes e.Key a candidate, protected if its content has been reused.
func (p *slru) Add(e Entry) {
	p.probation.remove(e.Key)
	p.protected.remove(e.Key)
	if e.Hits >= ReusedHits {
		p.protected.push(e.Key, e.LastAccess, 0)
	} else {
		p.probation.push(e.Key, e.LastAccess, 0)
	}
	p.rebalance()
	if invariant.Enabled {
		p.chk.after(p.check)
	}
}

// Remove withdraws key and reports whether it was a candidate.
func (p *slru) Remove(key int32) bool {
	ok := p.protected.remove(key) || p.probation.remove(key)
	p.rebalance()
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return ok
}

// Victim pops the least recently used probation candidate, else the least recently used
// protected one.
func (p *slru) Victim() (int32, bool) {
	var from uint32
	k, ok := p.probation.pop()
	if !ok {
		k, ok = p.protected.pop()
		from = 1
	}
	if ok {
		// One candidate fewer lowers the protected cap by at most one: at most one demotion.
		p.undo[k] = uint32(p.rebalance()+1)<<1 | from
	}
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return k, ok
}

// Restore undoes the latest Victim, which returned key (Restorer): the candidate that
// call demoted, if any, is protected again, and key is a candidate again in the segment it
// left, with its LastAccess.
func (p *slru) Restore(key int32) {
	if p.probation.has(key) || p.protected.has(key) {
		panic(fmt.Sprintf("evict: slru Restore of key %d, a candidate", key))
	}
	u := p.undo[key]
	if d := int32(u>>1) - 1; d >= 0 {
		t := p.probation.rankOf(d)
		p.probation.remove(d)
		p.protected.push(d, t, 0)
	}
	if u&1 != 0 {
		p.protected.restore(key)
	} else {
		p.probation.restore(key)
	}
	if invariant.Enabled {
		p.chk.after(p.check)
	}
}

// protectedCap is the most candidates the protected segment may hold.
func (p *slru) protectedCap() int { return p.Len() * p.percent / 100 }

// rebalance demotes protected candidates, least recently used first, until the protected
// segment is within its cap; it returns the last key it demoted, or -1 for none.
func (p *slru) rebalance() int32 {
	last := int32(-1)
	for p.protected.len() > p.protectedCap() {
		key, t, _, _ := p.protected.peek()
		p.protected.pop()
		p.probation.push(key, t, 0)
		last = key
	}
	return last
}

// Len is the number of candidates.
func (p *slru) Len() int { return p.probation.len() + p.protected.len() }

// Reset drops every candidate.
func (p *slru) Reset() {
	p.probation.reset()
	p.protected.reset()
}

// CheckInvariants verifies both segments, that no key is in both, and the protected cap.
func (p *slru) check() error {
	if err := p.probation.check(); err != nil {
		return fmt.Errorf("slru probation: %w", err)
	}
	if err := p.protected.check(); err != nil {
		return fmt.Errorf("slru protected: %w", err)
	}
	for _, k := range p.protected.heap {
		if p.probation.has(k) {
			return fmt.Errorf("slru: key %v is in both segments", k)
		}
	}
	if p.protected.len() > p.protectedCap() {
		return fmt.Errorf("slru: %d protected, cap %d", p.protected.len(), p.protectedCap())
	}
	return nil
}
