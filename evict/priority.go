package evict

import (
	"cmp"
	"fmt"

	"github.com/google/btree"
)

// MaxPriority is the highest retention priority; larger values are treated as MaxPriority.
const MaxPriority = 100

// Priority evicts by retention priority, as TensorRT-LLM's KvCacheRetentionConfig does:
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
type Priority[K cmp.Ordered] struct {
	clock   Clock
	set     *btree.BTreeG[prioItem[K]]
	entries map[K]prioItem[K] // key -> its item in set
	expiry  rankHeap[K]       // candidates with a pending expiry, by PriorityUntil
	v       verifier
}

type prioItem[K cmp.Ordered] struct {
	prio uint8
	t    uint64
	key  K
}

func prioLess[K cmp.Ordered](x, y prioItem[K]) bool {
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

// NewPriority returns an empty priority policy that reads the current time from clock,
// which must not be nil (share the cache's clock, so that retention times mean the same
// thing to both).
func NewPriority[K cmp.Ordered](clock Clock) *Priority[K] {
	if clock == nil {
		panic("evict: NewPriority needs a clock")
	}
	return &Priority[K]{
		clock:   clock,
		set:     btree.NewWithFreeListG(prioDegree, prioLess[K], btree.NewFreeListG[prioItem[K]](prioFreeNodes)),
		entries: make(map[K]prioItem[K]),
		expiry:  newRankHeap[K](),
	}
}

// Name returns "priority".
func (p *Priority[K]) Name() string { return "priority" }

// EffectivePriority is e's priority at time now under the rules of Priority.
func EffectivePriority[K cmp.Ordered](e Entry[K], now uint64) uint8 {
	if e.Priority == 0 || (e.PriorityUntil != 0 && now > e.PriorityUntil) {
		return DefaultPriority
	}
	return min(e.Priority, MaxPriority)
}

// Add makes e.Key a candidate in its priority class.
func (p *Priority[K]) Add(e Entry[K]) {
	p.drop(e.Key)
	it := prioItem[K]{prio: EffectivePriority(e, p.clock.Now()), t: e.LastAccess, key: e.Key}
	p.set.ReplaceOrInsert(it)
	p.entries[e.Key] = it
	if e.PriorityUntil != 0 && it.prio != DefaultPriority {
		p.expiry.push(e.Key, e.PriorityUntil, 0)
	}
	if checking {
		p.v.after(p.CheckInvariants)
	}
}

// Remove withdraws key and reports whether it was a candidate.
func (p *Priority[K]) Remove(key K) bool {
	ok := p.drop(key)
	if checking {
		p.v.after(p.CheckInvariants)
	}
	return ok
}

func (p *Priority[K]) drop(key K) bool {
	it, ok := p.entries[key]
	if !ok {
		return false
	}
	p.set.Delete(it)
	delete(p.entries, key)
	p.expiry.remove(key)
	return true
}

// expire moves every candidate whose retention time has passed to DefaultPriority.
func (p *Priority[K]) expire() {
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
func (p *Priority[K]) Victim() (K, bool) {
	p.expire()
	it, ok := p.set.DeleteMin()
	if ok {
		delete(p.entries, it.key)
		p.expiry.remove(it.key)
	}
	if checking {
		p.v.after(p.CheckInvariants)
	}
	return it.key, ok
}

// Len is the number of candidates.
func (p *Priority[K]) Len() int { return len(p.entries) }

// Reset drops every candidate.
func (p *Priority[K]) Reset() {
	p.set.Clear(true)
	clear(p.entries)
	p.expiry.reset()
}

// CheckInvariants verifies that the ordered set, the key map and the expiry heap agree.
func (p *Priority[K]) CheckInvariants() error {
	if p.set.Len() != len(p.entries) {
		return fmt.Errorf("priority: %d items in the set, %d keys", p.set.Len(), len(p.entries))
	}
	var err error
	p.set.Ascend(func(it prioItem[K]) bool {
		if got, ok := p.entries[it.key]; !ok || got != it {
			err = fmt.Errorf("priority: set item %+v, map says %+v", it, got)
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
	for _, s := range p.expiry.heap {
		if _, ok := p.entries[p.expiry.slots[s].key]; !ok {
			return fmt.Errorf("priority: key %v waits to expire but is no candidate", p.expiry.slots[s].key)
		}
	}
	return nil
}
