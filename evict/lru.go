package evict

import (
	"fmt"
	"math/bits"

	"github.com/kvpage/kvpage/internal/evictfast"
	"github.com/kvpage/kvpage/internal/invariant"
)

// The prefix index's fast paths (internal/evictfast) are this policy's alone: a type that
// embeds *lru is not *lru, and gets none.
func init() {
	evictfast.Of = func(p any) evictfast.Chain {
		if l, ok := p.(*lru); ok {
			return l
		}
		return nil
	}
}

// NewLRU returns an empty LRU policy for keys in [0, capacity), the default policy: it
// evicts the candidate with the oldest LastAccess first, ties broken by smallest key.
//
// Candidates can arrive out of time order (a parent becomes a leaf with an old LastAccess),
// so LRU keeps a binary heap ordered by (LastAccess, Key) rather than a list ordered by
// arrival: Add, Remove and Victim are O(log n). It costs 12 bytes per key of capacity.
// A capacity below 0 or above MaxCapacity is refused with an *ArgumentError.
func NewLRU(capacity int) (Policy, error) {
	if err := checkCapacity("lru", capacity); err != nil {
		return nil, err
	}
	kb := uint(bits.Len64(uint64(max(capacity, 1) - 1)))
	return &lru{heap: make([]uint64, 0, capacity), pos: make([]int32, capacity),
		kb: kb, mask: 1<<kb - 1, maxRel: 1<<(64-kb) - 1}, nil
}

// lru is the default policy and the prefix index's hot path, so it is specialised rather
// than built on rankHeap. Each heap element is one uint64, (LastAccess - base) << kb | key,
// where kb is the bits a key needs: one comparison orders by time then key, and a sift
// reads neighbouring memory and moves an element once per level (a hole, not swaps).
//
// base is 0 until a time no longer fits the 64 - kb bits left (2^51 ticks with 8,192 keys);
// then rebase moves it forward, and a candidate older than base by then counts as at base:
// such ancient candidates (2^(63-kb) ticks older than the newest) are ordered by key among
// themselves, the one place where this differs from exact LRU.
//
// Victim removes its key lazily: it marks the root popped and leaves it in place. If the
// next call is an Add of a new key, that key takes the root and sinks to its rank: one sift
// instead of a pop and a push. This is the cache's common step (the evicted leaf's parent
// becomes a candidate with an old time, and is often the next victim, so the sift stops at
// once); any other call first completes the removal (settle).
type lru struct {
	heap   []uint64
	pos    []int32 // per key: heap position + 1; 0 = not a candidate
	popped bool    // heap[0] is the last victim, not removed yet
	kb     uint    // bits of the key in an element
	mask   uint64  // 1<<kb - 1
	base   uint64  // time subtracted from every LastAccess
	maxRel uint64  // largest LastAccess - base that fits
	chk    checker
}

// Name returns "lru".
func (p *lru) Name() string { return "lru" }

// fit returns t, or base for a t older than base, after moving base forward if t is too
// new to fit.
func (p *lru) fit(t uint64) uint64 {
	if t < p.base {
		return p.base
	}
	p.rebase(t)
	return t
}

func (p *lru) key(it uint64) int32 { return int32(it & p.mask) }

// Add makes e.Key a candidate ordered by e.LastAccess.
func (p *lru) Add(e Entry) { p.AddAt(e.Key, e.LastAccess) }

// AddAt is Add(Entry{Key: key, LastAccess: lastAccess}) (internal/evictfast): the prefix
// index adds a candidate without building the Entry, whose Hits and Priority the LRU never
// reads, and Add is this with the two fields, so that neither call copies an Entry.
func (p *lru) AddAt(key int32, lastAccess uint64) {
	t := lastAccess
	if t < p.base || t-p.base > p.maxRel {
		t = p.fit(t)
	}
	it := (t-p.base)<<p.kb | uint64(key)
	switch {
	case p.pos[key] != 0: // a candidate already: re-rank it
		p.settle()
		i := int(p.pos[key]) - 1
		p.up(i, it)
		p.down(int(p.pos[key])-1, it)
	case p.popped: // take the last victim's place at the root
		p.popped = false
		p.down(0, it)
	default:
		p.heap = append(p.heap, it)
		p.up(len(p.heap)-1, it)
	}
	if invariant.Enabled {
		p.chk.after(p.check)
	}
}

// Remove withdraws key and reports whether it was a candidate.
func (p *lru) Remove(key int32) bool {
	if p.pos[key] == 0 {
		return false
	}
	p.settle()
	p.removeAt(int(p.pos[key]) - 1)
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return true
}

// AddVictim is Add(Entry{Key: key, LastAccess: lastAccess}) then Victim, in one call: the
// prefix index evicting a chain, whose victim's parent becomes a candidate right after
// the victim is popped and is usually the next one (internal/evictfast). The parent takes
// the popped root's place, sinks to its rank, and the root is popped again.
func (p *lru) AddVictim(key int32, lastAccess uint64) (int32, bool) {
	if invariant.Enabled || !p.popped || p.pos[key] != 0 || lastAccess < p.base || lastAccess-p.base > p.maxRel {
		p.Add(Entry{Key: key, LastAccess: lastAccess})
		return p.Victim()
	}
	// The common step, written out: the new element takes the popped root's place and,
	// ranking before both children (the parent of the victim is older than every other
	// candidate), stays there and is popped again at once. Add then Victim would leave
	// exactly this: the element at the root, no position recorded for key, a pop pending.
	it := (lastAccess-p.base)<<p.kb | uint64(key)
	h := p.heap
	if (len(h) < 2 || it < h[1]) && (len(h) < 3 || it < h[2]) {
		h[0] = it
		return key, true
	}
	p.popped = false
	p.down(0, it)
	return p.Victim()
}

// AddAfterVictim is AddAt for a key that is not a candidate, right after Victim
// (internal/evictfast): the parent of a single evicted block, the prefix index's step on
// every decode allocation in a full cache. The new element takes the popped root's place;
// ranking before both children (the parent is usually the oldest candidate, see
// AddVictim), it stays there, and neither the key's position nor the heap is read beyond
// the root's two children. Any other case is AddAt's.
func (p *lru) AddAfterVictim(key int32, lastAccess uint64) {
	if invariant.Enabled && p.pos[key] != 0 {
		// The fast path below would leave key in the heap twice; AddAt would hide it.
		panic(fmt.Sprintf("kvpage: broken invariant: AddAfterVictim of key %d, already a candidate", key))
	}
	if invariant.Enabled || !p.popped || lastAccess < p.base || lastAccess-p.base > p.maxRel {
		p.AddAt(key, lastAccess)
		return
	}
	it := (lastAccess-p.base)<<p.kb | uint64(key)
	p.popped = false
	if h := p.heap; (len(h) < 2 || it < h[1]) && (len(h) < 3 || it < h[2]) {
		h[0] = it
		p.pos[key] = 1
		return
	}
	p.down(0, it)
}

// Victim pops the least recently used candidate (lazily: see lru).
func (p *lru) Victim() (int32, bool) {
	p.settle()
	if len(p.heap) == 0 {
		return 0, false
	}
	k := p.key(p.heap[0])
	p.pos[k] = 0
	p.popped = true
	if invariant.Enabled {
		p.chk.after(p.check)
	}
	return k, true
}

// Len is the number of candidates.
func (p *lru) Len() int {
	if p.popped {
		return len(p.heap) - 1
	}
	return len(p.heap)
}

// Reset drops every candidate.
func (p *lru) Reset() {
	p.settle()
	for _, it := range p.heap {
		p.pos[p.key(it)] = 0
	}
	p.heap = p.heap[:0]
	p.base = 0
}

// settle completes a lazy Victim, if one is pending.
func (p *lru) settle() {
	if p.popped {
		p.finishPop()
	}
}

// finishPop completes a lazy Victim: the last element fills the root and sinks.
func (p *lru) finishPop() {
	p.popped = false
	last := len(p.heap) - 1
	moved := p.heap[last]
	p.heap = p.heap[:last]
	if last > 0 {
		p.down(0, moved)
	}
}

// rebase moves base so that time t fits with half the range to spare below it, clamping
// older candidates to the new base, and restores the heap order (clamped candidates now
// tie on time and go by key).
func (p *lru) rebase(t uint64) {
	p.settle()
	nb := t - p.maxRel/2
	shift := uint64(1<<64 - 1) // everything older than nb: all clamp
	if d := nb - p.base; d <= p.maxRel {
		shift = d << p.kb
	}
	for i, it := range p.heap {
		if it&^p.mask >= shift && shift != 1<<64-1 {
			p.heap[i] = it - shift
		} else {
			p.heap[i] = it & p.mask
		}
	}
	p.base = nb
	for i := len(p.heap)/2 - 1; i >= 0; i-- {
		p.down(i, p.heap[i])
	}
	for i, it := range p.heap {
		p.pos[p.key(it)] = int32(i + 1)
	}
}

// removeAt removes the candidate at heap position i (no victim pending).
func (p *lru) removeAt(i int) {
	p.pos[p.key(p.heap[i])] = 0
	last := len(p.heap) - 1
	moved := p.heap[last]
	p.heap = p.heap[:last]
	if i == last {
		return
	}
	p.up(i, moved)
	p.down(int(p.pos[p.key(moved)])-1, moved)
}

func (p *lru) set(i int, it uint64) {
	p.heap[i] = it
	p.pos[it&p.mask] = int32(i + 1)
}

// up places it at hole i or above.
func (p *lru) up(i int, it uint64) {
	h := p.heap
	for i > 0 {
		q := (i - 1) / 2
		if it >= h[q] {
			break
		}
		p.set(i, h[q])
		i = q
	}
	p.set(i, it)
}

// down places it at hole i or below.
func (p *lru) down(i int, it uint64) {
	h := p.heap
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r] < h[l] {
			m = r
		}
		if h[m] >= it {
			break
		}
		p.set(i, h[m])
		i = m
	}
	p.set(i, it)
}

// check verifies the heap order and the positions (the root is dead while a victim is
// pending).
func (p *lru) check() error {
	in := 0
	for i, it := range p.heap {
		k := p.key(it)
		if p.popped && i == 0 {
			if p.pos[k] == 1 {
				return fmt.Errorf("lru: the pending victim %d is still a candidate", k)
			}
			continue
		}
		in++
		if int(p.pos[k]) != i+1 {
			return fmt.Errorf("lru: key %d says heap position %d, is at %d", k, p.pos[k]-1, i)
		}
		if q := (i - 1) / 2; i > 0 && !(p.popped && q == 0) && it < p.heap[q] {
			return fmt.Errorf("lru: heap order broken at position %d", i)
		}
	}
	n := 0
	for _, x := range p.pos {
		if x != 0 {
			n++
		}
	}
	if n != in {
		return fmt.Errorf("lru: %d keys have a position, %d in the heap", n, in)
	}
	return nil
}
