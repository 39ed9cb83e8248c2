package evict

import (
	"fmt"

	"github.com/google/btree"
	"github.com/kvpage/kvpage/internal/invariant"
)

// priorityPolicy is the policy NewPriority returns.
type priorityPolicy struct {
	clock   Clock
	set     *btree.BTreeG[prioItem]
	entries []prioItem // per key: its item in set; prio 0 = not a candidate
	expiry  rankHeap   // candidates with a pending expiry, by PriorityUntil
	n       int        // candidates
	chk     checker
}

type prioItem struct {
	prio uint8
	t    uint64
	key  int32
}

func prioLess(x, y prioItem) bool {
	if x.prio != y.prio {
		return x.prio < y.prio
	}
	if x.t != y.t {
		return x.t < y.t
	}
	return x.key < y.key
}

// prioDegree is the B-tree's degree (nodes hold up to 2·degree−1 items); prioFreeNodes is
// how many emptied nodes it keeps for reuse, so that churn does not allocate.
const (
	prioDegree    = 16
	prioFreeNodes = 256
)

// MaxPriority is the highest retention priority; larger values are treated as MaxPriority.
const MaxPriority = 100

// NewPriority returns an empty priority policy for keys in [0, capacity) that reads the
// current time from clock, which must not be nil (share the cache's clock, so that
// retention times mean the same thing to both).
//
// It evicts by retention priority, as TensorRT-LLM's KvCacheRetentionConfig does:
// lower priority first, least recently used first within a priority, ties by smallest key.
//
// A candidate's effective priority at time now (read from the Clock given to NewPriority)
// is DefaultPriority when e.Priority is 0 or when e.PriorityUntil is set and now is past it
// (now > PriorityUntil: the retention time has run out); otherwise e.Priority, capped at
// MaxPriority. Victim orders by (effective priority, LastAccess, Key). Because Entry uses 0
// for "no priority", the lowest priority one can ask for is 1 (which, being below every
// other, behaves as TensorRT-LLM's 0).
//
// The candidates are an ordered set (a google/btree B-tree) keyed by (priority, LastAccess,
// Key). Candidates whose priority will expire are also in a heap by PriorityUntil; before
// each Victim, the ones whose time has passed move to DefaultPriority. Each candidate moves
// at most once per Add, so Add, Remove and Victim are O(log n) amortised.
func NewPriority(capacity int, clock Clock) (Policy, error) {
	if err := checkCapacity("priority", capacity); err != nil {
		return nil, err
	}
	if clock == nil {
		return nil, &ArgumentError{Policy: "priority", What: "clock"}
	}
	return &priorityPolicy{
		clock:   clock,
		set:     btree.NewWithFreeListG(prioDegree, prioLess, btree.NewFreeListG[prioItem](prioFreeNodes)),
		entries: make([]prioItem, capacity),
		expiry:  newRankHeap(capacity),
	}, nil
}

// Name returns "priority".
func (p *priorityPolicy) Name() string { return "priority" }

// EffectivePriority is e's priority at time now under the rules of NewPriority.
func EffectivePriority(e Entry, now uint64) uint8 {
	if e.Priority == 0 || (e.PriorityUntil != 0 && now > e.PriorityUntil) {
		return DefaultPriority
	}
	return min(e.Priority, MaxPriority)
}

// Add makes e.Key a candidate in its priority class.
func (p *priorityPolicy) Add(e Entry) {
	p.drop(e.Key)
	it := prioItem{prio: EffectivePriority(e, p.clock.Now()), t: e.LastAccess, key: e.Key}
	p.set.ReplaceOrInsert(it)
	p.entries[e.Key] = it
	p.n++
	if e.PriorityUntil != 0 && it.prio != DefaultPriority {
		p.expiry.push(e.Key, e.PriorityUntil, 0)
	}
	if invariant.Enabled {
		p.chk.after(p.check)
	}
}

// Remove withdraws key and reports whether it was a candidate.
func (p *priorityPolicy) Remove(key int32) bool {
	ok := p.drop(key)
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return ok
}

func (p *priorityPolicy) drop(key int32) bool {
	it := p.entries[key]
	if it.prio == 0 {
		return false
	}
	p.set.Delete(it)
	p.entries[key] = prioItem{}
	p.n--
	p.expiry.remove(key)
	return true
}

// expire moves every candidate whose retention time has passed to DefaultPriority.
func (p *priorityPolicy) expire() {
	now := p.clock.Now()
	for {
		key, until, _, ok := p.expiry.peek()
		if !ok || until >= now {
			return
		}
		p.expiry.pop()
		it := p.entries[key]
		p.set.Delete(it)
		it.prio = DefaultPriority
		p.set.ReplaceOrInsert(it)
		p.entries[key] = it
	}
}

// Victim pops the least recently used candidate of the lowest effective priority.
func (p *priorityPolicy) Victim() (int32, bool) {
	p.expire()
	it, ok := p.set.DeleteMin()
	if ok {
		p.entries[it.key] = prioItem{}
		p.n--
		p.expiry.remove(it.key)
	}
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return it.key, ok
}

// Len is the number of candidates.
func (p *priorityPolicy) Len() int { return p.n }

// Reset drops every candidate.
func (p *priorityPolicy) Reset() {
	p.set.Clear(true)
	clear(p.entries)
	p.n = 0
	p.expiry.reset()
}

// check verifies that the ordered set, the per-key items and the expiry heap agree.
func (p *priorityPolicy) check() error {
	if p.set.Len() != p.n {
		return fmt.Errorf("priority: %d items in the set, %d candidates", p.set.Len(), p.n)
	}
	n := 0
	for _, it := range p.entries {
		if it.prio != 0 {
			n++
		}
	}
	if n != p.n {
		return fmt.Errorf("priority: %d keys have an item, %d candidates", n, p.n)
	}
	var err error
	p.set.Ascend(func(it prioItem) bool {
		if got := p.entries[it.key]; got != it {
			err = fmt.Errorf("priority: set item %+v, key says %+v", it, got)
			return false
		}
		if it.prio == 0 || it.prio > MaxPriority {
			err = fmt.Errorf("priority: key %v has priority %d", it.key, it.prio)
			return false
		}
		if p.expiry.has(it.key) && it.prio == DefaultPriority {
			err = fmt.Errorf("priority: key %v waits to expire but already has the default priority", it.key)
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	if err := p.expiry.check(); err != nil {
		return err
	}
	for _, k := range p.expiry.heap {
		if p.entries[k].prio == 0 {
			return fmt.Errorf("priority: key %v waits to expire but is no candidate", k)
		}
	}
	return nil
}
