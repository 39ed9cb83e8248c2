package prefix

import (
	"fmt"

	"github.com/kvpage/kvpage/evict"
)

// slotLevel is what every lower tier has, whichever tree it serves (an Index's tiers,
// tierstore.go, or a GroupTree's, grouptree_tiers.go): its spec, its slots'
// free list (a stack: at first it hands out the lowest slots first, so that copies
// coalesce into runs; after churn it hands out the slot freed last, so runs coalesce less),
// its eviction policy over the slots, and the counts of resident slots and of slots
// reserved for copies in flight.
type slotLevel struct {
	spec     TierSpec
	free     []int32 // free slots, a stack: initially the lowest last; freed slots go on top
	policy   evict.Policy
	resident int
	pending  int
	// restorer is policy as an evict.Restorer, nil when it is none.
	restorer evict.Restorer
	// popped is makeRoom's scratch: the victims it popped since the first it skipped, in
	// order, a taken one as ^key; the skipped ones are candidates again as it returns.
	popped []int32
}

// newSlotLevel builds the level of spec s, every slot free, its policy (evict.NewLRU when
// s.Policy is nil) reading clock.
func newSlotLevel(s TierSpec, clock evict.Clock) (slotLevel, error) {
	l := slotLevel{spec: s, free: make([]int32, s.Capacity)}
	l.fill()
	var err error
	if s.Policy == nil {
		l.policy, err = evict.NewLRU(s.Capacity)
	} else {
		l.policy, err = s.Policy(s.Capacity, clock)
	}
	if err != nil {
		return slotLevel{}, fmt.Errorf("%w: tier policy: %w", ErrInvalidArgument, err)
	}
	if l.policy == nil {
		return slotLevel{}, ErrInvalidArgument
	}
	l.restorer, _ = l.policy.(evict.Restorer)
	return l, nil
}

// fill makes every slot free, the lowest handed out first.
func (l *slotLevel) fill() {
	l.free = l.free[:0]
	for s := l.spec.Capacity - 1; s >= 0; s-- {
		l.free = append(l.free, int32(s))
	}
}

// take hands out the lowest free slot as pending; the caller has checked one is free.
func (l *slotLevel) take() int32 {
	s := l.free[len(l.free)-1]
	l.free = l.free[:len(l.free)-1]
	l.pending++
	return s
}

// put frees slot s, counting it out of resident or pending as it was.
func (l *slotLevel) put(s int32, resident bool) {
	if resident {
		l.resident--
	} else {
		l.pending--
	}
	l.free = append(l.free, s)
}

// landed turns a pending slot resident.
func (l *slotLevel) landed() { l.pending--; l.resident++ }

// hide counts a resident slot as pending again: its key left the tier for lookups and
// events, and the slot frees when the copies reading it end.
func (l *slotLevel) hide() { l.resident--; l.pending++ }

// reset frees every slot and drops the policy's candidates.
func (l *slotLevel) reset() {
	l.fill()
	l.policy.Reset()
	l.resident, l.pending = 0, 0
}

// checkCounts verifies the level's counts against what its owner counted: res resident
// and pend pending slots, cand eviction candidates, and every free slot listed once and
// unowned (owned reports whether a slot has an owner).
func (l *slotLevel) checkCounts(t Tier, res, pend, cand int, owned func(s int32) bool) error {
	seen := make([]bool, l.spec.Capacity)
	for _, s := range l.free {
		if s < 0 || int(s) >= l.spec.Capacity || seen[s] || owned(s) {
			return fmt.Errorf("tier %d: free slot %d listed twice, out of range or owned", t, s)
		}
		seen[s] = true
	}
	for s := range l.spec.Capacity {
		if !seen[s] && !owned(int32(s)) {
			return fmt.Errorf("tier %d: slot %d neither free nor owned", t, s)
		}
	}
	if res != l.resident || pend != l.pending || res+pend+len(l.free) != l.spec.Capacity {
		return fmt.Errorf("tier %d: %d resident, %d pending, %d free, counted %d, %d", t, res, pend, len(l.free), l.resident, l.pending)
	}
	if l.policy.Len() != cand {
		return fmt.Errorf("tier %d: %d eviction candidates but %d candidate slots", t, l.policy.Len(), cand)
	}
	return nil
}
