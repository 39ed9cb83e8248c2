package prefix

import (
	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/internal/trusted"
)

func init() {
	trusted.ReleaseHeld = func(x any, ids []blocks.ID) { x.(*Index).releaseHeld(ids) }
	trusted.AcquireMatched = func(x any, ids []blocks.ID) { x.(*Index).acquireMatched(ids) }
	trusted.CommitHeld = func(x, cur, p any, ids []blocks.ID) (stored, duplicates, orphaned int, err error) {
		res, err := x.(*Index).commitHeld(cur.(*Cursor), p.(*Prompt), ids)
		return res.Stored, res.Duplicates, res.Orphaned, err
	}
	trusted.CommitNext = func(x, cur any, tokens []int32, id blocks.ID) bool {
		return x.(*Index).commitNext(cur.(*Cursor), tokens, id)
	}
}

// Acquire takes one reference on each of ids (cached blocks a request matched), takes them
// off the evictable set and touches them. All or nothing: a block that is not cached fails
// the call with ErrNotCached and changes nothing.
func (x *Index) Acquire(ids []blocks.ID) error {
	nodes, nb := x.nodes, x.nb // locals: IsCached would reload both for every block
	for _, id := range ids {
		if uint(id) >= uint(nb) || nodes[nodeOf(id)].flags&flagCached == 0 {
			return &BlockError{Op: "acquire", ID: id, Err: ErrNotCached}
		}
	}
	if err := x.pool.Retain(ids...); err != nil {
		return err // cannot happen for cached blocks; the pool changed nothing
	}
	x.acquireRetained(ids)
	return nil
}

// acquireMatched is Acquire for a path Peek has just matched, whose refcounts the caller
// checked against blocks.MaxRefCount (internal/trusted): no pass to check that each block
// is cached, and the pool's holder counts are raised in the index's own pass
// (internal/poolrefs) rather than by a checked Pool.Retain over the path first.
//
// A matched path runs from a namespace root down: each block's parent is the block before
// it, and only the last can be a leaf. So its pins are taken along the pass instead of by
// acquire's walk up from the tail: a block not yet pinned is pinned and counted in its
// parent's pinned children, and the parent, next in the pass, is pinned in its turn if it
// is not already, which is where the walk would have stopped. Each block ends as
// acquire leaves it, and the pass makes no call but a moved hint's (rehint).
func (x *Index) acquireMatched(ids []blocks.ID) {
	if invariant.Enabled {
		x.checkMatchedPath(ids)
	}
	if len(ids) == 0 {
		return
	}
	bn := x.nodes[1 : x.nb+1] // bn[id] is block id's node; refs is cut to match
	refs, nodes := x.refs[:len(bn)], x.nodes
	t := x.tick()
	if tail := int(ids[len(ids)-1]); bn[tail].flags&flagPinned == 0 && bn[tail].children == 0 {
		x.evRemoveSlow(int32(tail) + 1) // an unpinned leaf: in the eviction set
	}
	for i := len(ids) - 1; i >= 0; i-- {
		b := int(ids[i])
		nd := &bn[b]
		refs[b]++
		f := nd.flags
		if f&flagPinned == 0 {
			nd.flags = f | flagPinned
			x.pinned++
			if p := int(nd.parent) - 1; uint(p) < uint(len(bn)) { // not the root's child
				bn[p].pinnedKids++
			}
		}
		nd.lastAccess = t
		nd.hits++
		if f&flagMM == 0 && nodes[nd.parent].hint != int32(b)+1 {
			x.rehint(nd.parent, int32(b)+1) // reused now: the child the next request likely wants
		}
	}
	if x.tiers != nil {
		x.tierAcquired(ids)
	}
	x.mutated()
}

// checkMatchedPath panics unless ids is what acquireMatched takes: cached blocks below
// blocks.MaxRefCount holders, each the child of the one before it, the first a root's.
func (x *Index) checkMatchedPath(ids []blocks.ID) {
	for i, id := range ids {
		if !x.IsCached(id) || x.pool.RefCount(id) >= blocks.MaxRefCount {
			panic("kvpage: broken invariant: a trusted acquire of an uncached or saturated block")
		}
		parent := x.nodes[nodeOf(id)].parent
		if (i == 0 && x.nodes[parent].flags&flagRoot == 0) || (i > 0 && parent != nodeOf(ids[i-1])) {
			panic("kvpage: broken invariant: a trusted acquire of blocks that are not a path from a root")
		}
	}
}

// acquireRetained finishes an acquire once the pool holds the new references: it pins
// the blocks, takes them off the eviction set and touches them.
func (x *Index) acquireRetained(ids []blocks.ID) { x.acquire(ids, false) }

// acquire pins ids, takes them off the eviction set and touches them; with retain it also
// adds their holders (cached blocks: never a free one, so the pool's free list is not
// involved).
func (x *Index) acquire(ids []blocks.ID, retain bool) {
	if len(ids) == 0 {
		return
	}
	bn := x.nodes[1 : x.nb+1] // bn[id] is block id's node; refs is cut to match
	refs, nodes := x.refs[:len(bn)], x.nodes
	t := x.tick()
	// Last to first: along a path, pinning the tail pins every block above it in one walk,
	// and the blocks above then find themselves pinned already. The outcome (which blocks
	// are pinned, their pinned-children counts, the eviction set) does not depend on the
	// order; only ancestors of a block are walked, and they have children, so none of them
	// is in the eviction set.
	for i := len(ids) - 1; i >= 0; i-- {
		b := int(ids[i])
		nd := &bn[b]
		if retain {
			refs[b]++
		}
		if nd.flags&flagPinned == 0 {
			if nd.children == 0 {
				x.evRemoveSlow(int32(b) + 1) // an unpinned leaf: in the eviction set
			}
			x.pin(int32(b) + 1)
		}
		nd.lastAccess = t
		nd.hits++
		if nd.flags&flagMM == 0 && nodes[nd.parent].hint != int32(b)+1 {
			x.rehint(nd.parent, int32(b)+1) // reused now: the child the next request likely wants
		}
	}
	if x.tiers != nil {
		x.tierAcquired(ids)
	}
	x.mutated()
}

// rehint makes c, a text-only child of p, p's hint. The hint child is the one child of p
// the child table does not hold (see Index.nodes), so the old hint goes into the table and
// c leaves it. Along a path that requests share the hint is already the acquired child;
// this is the rarer move, out of line.
//
//go:noinline
func (x *Index) rehint(p, c int32) {
	if old := x.nodes[p].hint; old != 0 {
		x.table.insert(old, x.nodes[old].key)
	}
	x.table.remove(c, x.nodes[c].key)
	x.nodes[p].hint = c
}

// Release drops the caller's reference on each of ids. Cached blocks left with only the
// index's reference become evictable (leaves first); uncached blocks go back to the pool.
// All or nothing: releasing a cached block nobody acquired fails with ErrNotAcquired,
// releasing a free block fails with the pool's error, and either changes nothing.
//
// Release touches the cached blocks from the last of ids to the first, one clock tick each,
// so the tail of a request's path is older than its head: vLLM frees a request's blocks in
// reverse order for the same reason.
func (x *Index) Release(ids []blocks.ID) error {
	if err := x.checkRelease(ids); err != nil {
		return err
	}
	if err := x.pool.Release(ids...); err != nil {
		x.clearMarks(ids)
		return err // an uncached block the caller does not hold; nothing changed
	}
	x.released(ids)
	return nil
}

// releaseHeld is Release for blocks the caller holds, each once (internal/trusted): a
// Manager's table. It skips checkRelease, which under that invariant cannot fail, and
// drops the holders of cached blocks in its own pass (internal/poolrefs: a cached block
// keeps the index's reference, so none is freed there); only uncached blocks go through
// Pool.Release, in their order, which still checks their refcounts.
func (x *Index) releaseHeld(ids []blocks.ID) {
	if invariant.Enabled {
		if err := x.checkRelease(ids); err != nil {
			panic("kvpage: broken invariant: a trusted release: " + err.Error())
		}
		x.clearMarks(ids)
	}
	if x.ctr == nil {
		x.release(ids, true) // a clock of the caller's: ticked through its interface
		return
	}
	x.releaseHeldCounted(ids, x.ctr)
}

// releaseHeldCounted is release(ids, true) with the default clock, for a Manager's table:
// the same ticks, stamps, unpins and eviction-set additions in the same order. It is
// release's loop without what the trusted call does not need (checkRelease's marks, which
// it never set; the refcount's check, which checkRelease makes under kvinvariants) and
// with the clock's tick in line, so that the common block (cached, pinned, left with the
// index's reference, its parent next in ids) makes no call and spills nothing.
func (x *Index) releaseHeldCounted(ids []blocks.ID, ctr *evict.Counter) {
	bn := x.nodes[1 : x.nb+1] // bn[id] is block id's node; refs is cut to match
	refs := x.refs[:len(bn)]
	uncached := 0
	for i := len(ids) - 1; i >= 0; i-- {
		b := int(ids[i])
		if uint(b) >= uint(len(bn)) {
			uncached++
			continue
		}
		nd := &bn[b]
		f := nd.flags
		if f&flagCached == 0 {
			uncached++
			continue
		}
		r := refs[b] - 1
		refs[b] = r
		t := ctr.Tick()
		nd.lastAccess = t
		if f&flagPinned == 0 {
			if nd.children == 0 {
				x.touch(int32(b)+1, t) // an evictable leaf already: re-ranked (see release)
			}
			continue
		}
		if nd.pinnedKids > 0 || r > 1 {
			continue // still held, or above a held block
		}
		nd.flags = f &^ flagPinned
		x.pinned--
		if nd.children == 0 {
			x.evAdd(int32(b) + 1)
		}
		p := int(nd.parent) - 1 // its block
		if uint(p) >= uint(len(bn)) {
			continue // under a namespace root
		}
		bn[p].pinnedKids--
		if i == 0 || int(ids[i-1]) != p {
			x.unpinFrom(int32(p) + 1)
		}
	}
	if uncached > 0 {
		x.releaseUncached(ids, uncached)
	}
	x.mutated()
}

// released finishes a release once the pool has dropped the references: it touches the
// cached blocks, clears checkRelease's marks and unpins what nothing holds any more.
func (x *Index) released(ids []blocks.ID) { x.release(ids, false) }

// release touches the cached blocks of ids, clears checkRelease's marks and unpins what
// nothing holds any more. With drop it also drops one holder of each block: of a cached
// block in its own pass, of the others through Pool.Release after it (in their order, so
// the free list sees them as before); without, the pool has dropped them already.
func (x *Index) release(ids []blocks.ID, drop bool) {
	// One pass from the last block to the first: stamp, clear checkRelease's mark, unpin.
	// The pool has already dropped every reference, so a block left with no holder and no
	// pinned child loses its pin (a leaf becomes evictable: one heap push) and its parent
	// one pinned child. Along a request's path the parent is the next block of the pass,
	// which unpins it in turn; any other parent is walked up at once (unpinFrom). Either
	// way each block ends as if the whole path had been unpinned from the tail first.
	// bn is the block nodes (bn[id] is block id's node) and refs is cut to the same
	// length, so that one test of an ID bounds both and the loop has no other check.
	bn := x.nodes[1 : x.nb+1]
	refs := x.refs[:len(bn)]
	uncached := 0 // with drop: blocks left for the pool
	for i := len(ids) - 1; i >= 0; i-- {
		id := ids[i]
		b := int(id)
		if uint(b) >= uint(len(bn)) {
			uncached++
			continue
		}
		nd := &bn[b]
		if nd.flags&flagCached == 0 {
			uncached++
			continue
		}
		r := refs[b]
		if drop {
			if r < 2 {
				panic("kvpage: broken invariant: a trusted release of a cached block the caller does not hold")
			}
			r--
			refs[b] = r
		}
		nd.flags &^= flagMark
		t := x.tick()
		switch {
		case nd.flags&flagPinned != 0:
			nd.lastAccess = t
			if nd.pinnedKids > 0 || r > 1 {
				break // still held, or above a held block
			}
			nd.flags &^= flagPinned
			x.pinned--
			if nd.children == 0 {
				x.evAdd(nodeOf(id))
			}
			p := int(nd.parent) - 1 // its block
			if uint(p) >= uint(len(bn)) {
				break // under a namespace root
			}
			bn[p].pinnedKids--
			if i == 0 || int(ids[i-1]) != p {
				x.unpinFrom(int32(p) + 1)
			}
		case nd.children == 0:
			// Listed again after an earlier occurrence in this call made it an evictable
			// leaf: its new time must go through the eviction set, or the set's order breaks.
			x.touch(nodeOf(id), t)
		default:
			nd.lastAccess = t // unpinned already, by the walk up from a block below it
		}
	}
	if drop && uncached > 0 {
		x.releaseUncached(ids, uncached)
	}
	x.mutated()
}

// releaseUncached hands the k blocks of ids that are not cached to Pool.Release, in
// their order (the free list's), after release dropped the cached ones in its pass.
func (x *Index) releaseUncached(ids []blocks.ID, k int) {
	buf := x.relBuf[:0]
	if k == len(ids) {
		buf = ids
	} else {
		for _, id := range ids {
			if !x.IsCached(id) {
				buf = append(buf, id)
			}
		}
		x.relBuf = buf
	}
	if err := x.pool.Release(buf...); err != nil {
		panic("kvpage: broken invariant: a trusted release failed: " + err.Error())
	}
}

// checkRelease verifies that the caller holds every cached block of ids as many times as it
// releases it: each needs a holder beyond the index. On success the cached blocks of ids are
// left marked (flagMark) for Release to clear in its own pass; on error nothing is marked.
func (x *Index) checkRelease(ids []blocks.ID) error {
	repeated := false
	nodes, nb := x.nodes, x.nb
	for _, id := range ids {
		if uint(id) >= uint(nb) {
			continue
		}
		nd := &nodes[nodeOf(id)]
		if nd.flags&flagCached == 0 {
			continue
		}
		if x.pool.RefCount(id) < 2 {
			x.clearMarks(ids)
			return &BlockError{Op: "release", ID: id, Err: ErrNotAcquired}
		}
		if nd.flags&flagMark != 0 {
			repeated = true
		}
		nd.flags |= flagMark
	}
	if !repeated {
		return nil
	}
	// Slow path, only when a cached block appears more than once: count exactly.
	for i, id := range ids {
		if !x.IsCached(id) {
			continue
		}
		k := 0
		for _, other := range ids {
			if other == id {
				k++
			}
		}
		if x.pool.RefCount(id) < 1+k {
			x.clearMarks(ids)
			return &BlockError{Op: "release", ID: ids[i], Err: ErrNotAcquired}
		}
	}
	return nil
}

func (x *Index) clearMarks(ids []blocks.ID) {
	for _, id := range ids {
		if id >= 0 && int(id) < x.nb {
			x.nodes[id+1].flags &^= flagMark
		}
	}
}

// pin marks block node n pinned (held, or above a held block) and pins its ancestors until
// one already is. The caller has taken n off the eviction set.
func (x *Index) pin(n int32) {
	bn := x.nodes[1 : x.nb+1] // bn[b] is block b's node
	for b := int(n) - 1; uint(b) < uint(len(bn)); {
		nd := &bn[b]
		if nd.flags&flagPinned != 0 {
			return
		}
		nd.flags |= flagPinned
		x.pinned++
		p := int(nd.parent) - 1 // its block, or below 0 / past the blocks for a root
		if uint(p) >= uint(len(bn)) {
			return
		}
		bn[p].pinnedKids++
		b = p
	}
}

// unpinFrom unpins block node n if nothing holds it or anything below it any more, adds
// it to the eviction set if it is a leaf, and walks up while ancestors become unpinned.
func (x *Index) unpinFrom(n int32) {
	bn := x.nodes[1 : x.nb+1] // bn[b] is block b's node; refs is cut to match
	refs := x.refs[:len(bn)]
	for b := int(n) - 1; uint(b) < uint(len(bn)); {
		nd := &bn[b]
		if nd.flags&flagPinned == 0 || nd.pinnedKids > 0 || refs[b] > 1 {
			return
		}
		nd.flags &^= flagPinned
		x.pinned--
		if nd.children == 0 {
			x.evAdd(int32(b) + 1)
		}
		p := int(nd.parent) - 1 // its block, or outside the blocks for a root
		if uint(p) >= uint(len(bn)) {
			return
		}
		bn[p].pinnedKids--
		b = p
	}
}
