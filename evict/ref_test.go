package evict

import (
	"cmp"
	"math"
)

// refPolicy is the reference model of every built-in eviction policy: it keeps the
// candidates in a plain map and, for every Victim, scans all of them and picks the minimum
// by the policy's definition as doc comments state it. It is slow and obviously right; the
// real policies must pop the same keys in the same order.
type refPolicy struct {
	kind     string
	clock    Clock
	halfLife uint64
	percent  int
	score    func(Entry) float64
	cands    map[int32]*refCand
	seq      uint64
}

type refCand struct {
	e       Entry
	arrival uint64 // number of the Add that made it a candidate
	demoted bool   // SLRU: moved from protected to probation
}

func newRef(kind string, clock Clock) *refPolicy {
	return &refPolicy{kind: kind, clock: clock, cands: map[int32]*refCand{},
		halfLife: DefaultHalfLife, percent: defaultPercent(kind)}
}

func defaultPercent(kind string) int {
	switch kind {
	case "slru":
		return DefaultProtectedPercent
	case "s3fifo":
		return DefaultSmallPercent
	}
	return 0
}

func (r *refPolicy) Len() int { return len(r.cands) }

func (r *refPolicy) Reset() { clear(r.cands) }

func (r *refPolicy) Add(e Entry) {
	r.seq++
	r.cands[e.Key] = &refCand{e: e, arrival: r.seq}
	r.rebalance()
}

func (r *refPolicy) Remove(k int32) bool {
	_, ok := r.cands[k]
	delete(r.cands, k)
	r.rebalance()
	return ok
}

func (r *refPolicy) Victim() (int32, bool) {
	if len(r.cands) == 0 {
		return 0, false
	}
	var pick func(c *refCand) bool // which candidates may be picked
	switch r.kind {
	case "slru":
		if r.count(r.probation) > 0 {
			pick = r.probation
		} else {
			pick = r.protected
		}
	case "s3fifo":
		small := r.count(isOneHit)
		if small > 0 && (small == len(r.cands) || 100*small >= r.percent*len(r.cands)) {
			pick = isOneHit
		} else {
			pick = func(c *refCand) bool { return !isOneHit(c) }
		}
	}
	best := r.min(pick, r.before)
	delete(r.cands, best.e.Key)
	r.rebalance()
	return best.e.Key, true
}

func isOneHit(c *refCand) bool { return c.e.Hits < ReusedHits }

func (r *refPolicy) protected(c *refCand) bool { return c.e.Hits >= ReusedHits && !c.demoted }
func (r *refPolicy) probation(c *refCand) bool { return !r.protected(c) }

func (r *refPolicy) count(f func(*refCand) bool) int {
	n := 0
	for _, c := range r.cands {
		if f(c) {
			n++
		}
	}
	return n
}

func (r *refPolicy) min(pick func(*refCand) bool, before func(a, b *refCand) bool) *refCand {
	var best *refCand
	for _, c := range r.cands {
		if pick != nil && !pick(c) {
			continue
		}
		if best == nil || before(c, best) {
			best = c
		}
	}
	return best
}

// rebalance applies SLRU's demotion rule: while the protected segment exceeds its share,
// demote its least recently used candidate.
func (r *refPolicy) rebalance() {
	if r.kind != "slru" {
		return
	}
	for r.count(r.protected) > len(r.cands)*r.percent/100 {
		r.min(r.protected, byTimeThenKey).demoted = true
	}
}

func byTimeThenKey(a, b *refCand) bool {
	if a.e.LastAccess != b.e.LastAccess {
		return a.e.LastAccess < b.e.LastAccess
	}
	return a.e.Key < b.e.Key
}

// before is the policy's order, written from its definition.
func (r *refPolicy) before(a, b *refCand) bool {
	switch r.kind {
	case "lru", "slru":
		return byTimeThenKey(a, b)
	case "mru":
		if a.e.LastAccess != b.e.LastAccess {
			return a.e.LastAccess > b.e.LastAccess
		}
		return a.e.Key < b.e.Key
	case "fifo", "s3fifo":
		return a.arrival < b.arrival
	case "lfu":
		sa, sb := LFUScore(a.e.LastAccess, a.e.Hits, r.halfLife), LFUScore(b.e.LastAccess, b.e.Hits, r.halfLife)
		if sa != sb {
			return sa < sb
		}
		return byTimeThenKey(a, b)
	case "priority":
		now := r.clock.Now()
		pa, pb := refEffective(a.e, now), refEffective(b.e, now)
		if pa != pb {
			return pa < pb
		}
		return byTimeThenKey(a, b)
	case "scored":
		if c := refCompareScores(r.score(a.e), r.score(b.e)); c != 0 {
			return c < 0
		}
		return a.e.Key < b.e.Key
	}
	panic("refPolicy: unknown kind " + r.kind)
}

func refEffective(e Entry, now uint64) int {
	switch {
	case e.Priority == 0:
		return DefaultPriority
	case e.PriorityUntil != 0 && now > e.PriorityUntil:
		return DefaultPriority
	case e.Priority > 100:
		return 100
	}
	return int(e.Priority)
}

// refCompareScores orders scores as Scored documents: NaN below everything, -0 == +0.
func refCompareScores(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return -1
	case bn:
		return 1
	}
	return cmp.Compare(a, b) // cmp.Compare(-0.0, 0.0) == 0
}

// must is a constructor's Policy, for tests whose arguments are valid.
func must(p Policy, err error) Policy {
	if err != nil {
		panic(err)
	}
	return p
}
