package hybrid

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/internal/trusted"
	"github.com/kvpage/kvpage/prefix"
)

// store is the Manager's view of its pool and prefix index: vLLM's free queue with the
// blocks' refcounts (blocks.FreeQueue) and the multi-group prefix tree
// (prefix.GroupTree), composed where vLLM's order of evictions comes from their
// interplay. One free queue holds every unreferenced block, cached or not, in the order it
// was freed; allocation pops its front and evicts the block if it is cached; a hit takes
// cached blocks out of the queue from anywhere. The tree is told of the eviction; the
// queue never knows what a block caches.
//
// Sliding-window and Mamba blocks are released while the sequence still holds later ones,
// so their entries are evicted from the middle of a chain; the tree keeps the node as a
// tombstone for the later ones. Full-attention entries are evicted in queue order too,
// and with every sequence releasing last block first that order is leaf-first: a node's
// full-attention entries are never all gone while a child has one (CheckInvariants).
type store struct {
	q          *blocks.FreeQueue
	t          *prefix.GroupTree
	heads      *[]int32   // t's device list heads, for first (internal/trusted.GroupHeads)
	ng         int        // t's groups
	unhashedUp bool       // free uncached blocks to the front (vLLM's newer order)
	tiers      *tierState // the device's side of the lower tiers (tiers.go), nil without

	evictions uint64
	dropped   uint64

	// win marks a block a sliding window (or Mamba state) released mid-sequence, until it
	// is allocated or hit again: its eviction is then EvictWindow.
	win []bool
}

func newStore(numBlocks, unit, ng int, unhashedFirst bool) *store {
	q, err := blocks.NewFreeQueue(numBlocks)
	if err != nil {
		panic(err) // New validated the sizes
	}
	t, err := prefix.NewGroupTree(numBlocks, unit, ng)
	if err != nil {
		panic(err)
	}
	return &store{q: q, t: t, heads: trusted.GroupHeads(t), ng: ng, unhashedUp: unhashedFirst, win: make([]bool, numBlocks)}
}

// must panics on an error of the queue or the tree under the kvinvariants build tag: the
// Manager checks every argument before it calls them, so one is a broken invariant, which
// CheckInvariants would find too. In a normal build the check compiles away, and with it
// the cost that kept these wrappers from being inlined.
func must(err error) {
	if invariant.Enabled && err != nil {
		broken(err)
	}
}

//go:noinline
func broken(err error) { panic("kvpage: broken invariant: hybrid: " + err.Error()) }

// free is the number of blocks in the free queue.
func (s *store) free() int { return s.q.Len() }

// ref is b's reference count.
func (s *store) ref(b blocks.ID) int { return s.q.RefCount(b) }

// alloc pops the queue's front, evicting it if it is cached. The caller has checked free.
func (s *store) alloc() blocks.ID {
	b, err := s.q.Pop()
	must(err)
	if s.t.IsCached(b) {
		s.evict(b)
	}
	s.win[b] = false
	return b
}

// release drops a reference to b; unreferenced, it joins the queue's end (or its front,
// for an uncached block under the newer order).
func (s *store) release(b blocks.ID) {
	if s.unhashedUp {
		s.releaseUnhashedFirst(b)
		return
	}
	must(s.q.Release(b))
}

// allocN appends n blocks from the queue's front to t, evicting those that are cached, in
// queue order. The caller has checked free.
func (s *store) allocN(t []blocks.ID, n int) []blocks.ID {
	start := len(t)
	t, err := s.q.Allocate(t, n)
	must(err)
	if s.tiers != nil {
		s.countEvictions(t[start:])
	}
	for _, b := range t[start:] {
		if s.t.IsCached(b) {
			cause := prefix.EvictPolicy
			if s.win[b] {
				cause = prefix.EvictWindow
			}
			must(s.t.UncacheAs(b, cause))
			s.evictions++
		}
		s.win[b] = false
	}
	return t
}

// evict uncaches b, a cached block just taken off the queue, saying why.
func (s *store) evict(b blocks.ID) {
	cause := prefix.EvictPolicy
	if s.win[b] {
		cause = prefix.EvictWindow
	}
	if s.tiers != nil {
		s.t.CountDeviceEviction(b)
	}
	must(s.t.UncacheAs(b, cause))
	s.evictions++
}

// releaseWindow releases the blocks a group released mid-sequence (t, last first), marked
// so that their eviction says EvictWindow.
func (s *store) releaseWindow(t []blocks.ID) {
	for _, b := range t {
		s.win[b] = true
	}
	s.releaseTable(t)
}

// releaseTable releases the blocks of t (null entries skipped) last first.
func (s *store) releaseTable(t []blocks.ID) {
	if !s.unhashedUp {
		must(s.q.ReleaseTable(t))
		return
	}
	for i := len(t) - 1; i >= 0; i-- {
		if t[i] != blocks.NullID {
			s.releaseUnhashedFirst(t[i])
		}
	}
}

// take adds a reference to a hit block, taking it out of the queue if it was there.
func (s *store) take(b blocks.ID) { must(s.q.Retain(b)) }

// releaseUnhashedFirst drops a reference to b; unreferenced, b joins the queue's front if
// it is not cached (vLLM's newer order), else its end.
func (s *store) releaseUnhashedFirst(b blocks.ID) {
	if s.t.IsCached(b) {
		must(s.q.Release(b))
	} else {
		must(s.q.ReleaseToFront(b))
	}
}

// cache records b as cached for group g at node n.
func (s *store) cache(b blocks.ID, n prefix.Node, g int) { must(s.t.Cache(b, n, g)) }

// cacheChain caches ids (a run of group g's table) along path, block i at path[(i+1)k-1].
func (s *store) cacheChain(g int, ids []blocks.ID, path []prefix.Node, k int) {
	must(s.t.CacheChain(g, ids, path, k))
}

// takeTable adds a reference to each hit block of ids, taking it out of the queue if it
// was there.
// A group that releases early (early) may take blocks it marked: they are held again,
// and a later eviction is the policy's unless they are released early again.
func (s *store) takeTable(ids []blocks.ID, early bool) {
	must(s.q.RetainTable(ids))
	if early {
		for _, b := range ids {
			s.win[b] = false
		}
	}
}

// first returns the first block cached for group g at node n, or the null block: the
// tree's First without its range check (internal/trusted.GroupHeads), since every caller
// passes a node of its walk and a group of the Manager; the lookups' inner step, once per
// block and group. Under the kvinvariants build tag a group out of range panics (a node
// out of range always does).
func (s *store) first(n prefix.Node, g int) blocks.ID {
	if invariant.Enabled && uint(g) >= uint(s.ng) {
		broken(fmt.Errorf("group %d of %d at node %d", g, s.ng, n))
	}
	return blocks.ID((*s.heads)[int(n)*s.ng+g])
}

// root returns ns's root node, creating it if create is set (prefix.NoNode if absent).
func (s *store) root(ns prefix.Namespace, create bool) prefix.Node { return s.t.Root(ns, create) }

// next finds the child of parent for the unit toks, or 0.
func (s *store) next(parent prefix.Node, toks []int32) prefix.Node { return s.t.Next(parent, toks) }

// ensure returns the child of parent for the unit toks, creating it if needed.
func (s *store) ensure(parent prefix.Node, toks []int32) prefix.Node {
	return s.t.Ensure(parent, toks)
}

func (s *store) pin(n prefix.Node)   { must(s.t.Pin(n)) }
func (s *store) unpin(n prefix.Node) { must(s.t.Unpin(n)) }

// drop uncaches b if it is a cached block of the pool (EvictBlocks), and reports whether
// it was.
func (s *store) drop(b blocks.ID) bool {
	if _, ok := s.t.Entry(b); !ok {
		return false
	}
	must(s.t.Uncache(b))
	s.dropped++
	return true
}
