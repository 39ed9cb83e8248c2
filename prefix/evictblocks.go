package prefix

import (
	"fmt"
	"slices"

	"github.com/kvpage/kvpage/blocks"
)

// Dropping given blocks (EvictBlocks), for maintainers. vLLM's evict_blocks removes the
// listed blocks' hashes from its flat map; blocks chained below one stay in the map but
// no lookup reaches them any more, since a lookup stops at its first miss. In the tree a
// block below a dropped one would have no parent, so it leaves with it: the outcome a
// lookup sees is vLLM's, and every cached path stays a valid prefix. The call works in
// three passes over the blocks: one marks the listed cached blocks (flagMark) and then
// every cached block below one, found by walking up from each cached block once (the
// blocks a walk proves to lie under no marked one are flagKept, so no node is walked
// twice: O(pool blocks) in all); one takes the unreferenced leaves among them out of the
// eviction set; one unlinks them, each block before its parent. Nothing changes before
// every check has passed.

// flagKept marks, during one EvictBlocks, a cached block that lies under no dropped one.
const flagKept uint8 = 1 << 6

// EvictBlocks drops the cached blocks of ids from the index, and every cached block below
// one of them, and appends to dst the blocks that left, in the order they left: each
// block before its parent (deepest first, ties by block ID). It is vLLM's
// BlockPool.evict_blocks, for blocks that hold no valid KV: a step committed them before
// its forward pass, and the pass did not run, or a KV connector failed to load them, or
// the server rejected the KV. No later lookup returns a dropped block, nor anything only
// reachable through one (vLLM leaves such blocks in its map, unreachable; the tree drops
// them). A dropped block that a request holds (or a Pin) stays allocated to it, no longer
// cached: its Release hands it back to the pool, and a Commit under a cursor past it
// finds its prefix gone (Orphaned) unless another request has cached the prefix again.
// A dropped block nobody holds goes back to the pool's free list. Blocks of ids that are
// not cached (a free block, the null block, one dropped already) are ignored, and so are
// repeats.
//
// The observer gets one BlockRemoved with every dropped block (vLLM sends one per block
// its evict_blocks takes from the map; here the blocks it leaves unreachable leave too,
// and are reported), Stats counts them as Dropped, and the eviction history records them
// as EvictDropped. Lower tiers' copies of the same prefixes stay (as the hybrid Manager's
// EvictBlocks keeps them): they were copied from blocks that held their KV.
//
// All or nothing: an ID outside the pool fails the call with a *BlockError wrapping
// ErrInvalidArgument, and an index with lower tiers refuses while a transfer or a
// demotion is in flight (ErrTransfersPending, as Reset does); either changes nothing.
// It costs O(pool blocks + dropped blocks x depth x log dropped blocks) (the deepest-first
// sort measures depth in its comparisons) and is for failures, not a hot path.
func (x *Index) EvictBlocks(dst, ids []blocks.ID) ([]blocks.ID, error) {
	for _, id := range ids {
		if uint(id) >= uint(x.nb) {
			return dst, &BlockError{Op: "evict", ID: id, Err: ErrInvalidArgument}
		}
	}
	if x.tiers != nil {
		if k := x.PendingTransfers(); k > 0 || x.tiers.demoting > 0 {
			return dst, fmt.Errorf("%w: %d transfers, %d demotions", ErrTransfersPending, k, x.tiers.demoting)
		}
	}
	start := len(dst)
	dst = x.markDropped(dst, ids)
	doomed := dst[start:]
	if len(doomed) == 0 {
		return dst, nil
	}
	x.orderDropped(doomed)
	for _, id := range doomed {
		if n := nodeOf(id); evictable(&x.nodes[n]) {
			x.evRemoveSlow(n)
		}
	}
	hashes := x.hashBuf[:0]
	for _, id := range doomed {
		n := nodeOf(id)
		if x.obs != nil {
			hashes = x.appendHash(hashes, n) // the path above n is whole: its parent leaves later
		}
		x.dropNode(n)
	}
	x.hashBuf = hashes
	if err := x.pool.Release(doomed...); err != nil {
		panic("kvpage: broken invariant: releasing dropped blocks failed: " + err.Error())
	}
	x.stats.dropped += uint64(len(doomed))
	if x.obs != nil {
		x.emitRemoved(doomed, hashes)
	}
	x.mutated()
	return dst, nil
}

// markDropped marks (flagMark) the cached blocks of ids and every cached block below one,
// and appends them to dst in block order. It changes nothing else: the marks are what
// dropNode clears.
func (x *Index) markDropped(dst, ids []blocks.ID) []blocks.ID {
	found := false
	for _, id := range ids {
		if nd := &x.nodes[nodeOf(id)]; nd.flags&flagCached != 0 {
			nd.flags |= flagMark
			found = true
		}
	}
	if !found {
		return dst
	}
	path := x.pathBuf[:0]
	for n := int32(1); int(n) <= x.nb; n++ {
		if x.nodes[n].flags&(flagCached|flagMark|flagKept) != flagCached {
			continue
		}
		// Walk up to a decided node (marked, kept) or the root, then decide the path.
		path = append(path[:0], n)
		c := x.nodes[n].parent
		for x.isBlock(c) && x.nodes[c].flags&(flagMark|flagKept) == 0 {
			path = append(path, c)
			c = x.nodes[c].parent
		}
		f := flagKept
		if x.isBlock(c) && x.nodes[c].flags&flagMark != 0 {
			f = flagMark
		}
		for _, m := range path {
			x.nodes[m].flags |= f
		}
	}
	x.pathBuf = path
	for n := int32(1); int(n) <= x.nb; n++ {
		nd := &x.nodes[n]
		nd.flags &^= flagKept
		if nd.flags&flagMark != 0 {
			dst = append(dst, blockOf(n))
		}
	}
	return dst
}

// orderDropped sorts the marked blocks ids so that each comes before its parent: by depth
// from the namespace root, deepest first, ties by block ID.
func (x *Index) orderDropped(ids []blocks.ID) {
	depth := func(id blocks.ID) int {
		d := 0
		for c := nodeOf(id); x.isBlock(c); c = x.nodes[c].parent {
			d++
		}
		return d
	}
	slices.SortFunc(ids, func(a, b blocks.ID) int {
		if da, db := depth(a), depth(b); da != db {
			return db - da
		}
		return int(a - b)
	})
}

// dropNode takes block node n, a marked leaf no longer in the eviction set, out of the
// tree as an eviction does, and settles its parent if the parent stays: a parent left an
// unreferenced leaf joins the eviction set, and one that n alone kept pinned is unpinned
// (and its ancestors with it). The pool reference stays for the caller to release.
func (x *Index) dropNode(n int32) {
	nd := &x.nodes[n]
	p := nd.parent
	wasPinned := nd.flags&flagPinned != 0
	if wasPinned {
		nd.flags &^= flagPinned
		x.pinned--
		if x.isBlock(p) {
			x.nodes[p].pinnedKids--
		}
	}
	if x.ctl.ghost.on() {
		x.ctl.ghost.record(x.eventKey(n), x.clock.Now(), EvictDropped)
	}
	if x.tiers != nil {
		x.tierDropped(n)
	}
	leaf := x.unlink(n, nd)
	if !x.isBlock(p) || x.nodes[p].flags&flagMark != 0 {
		return // under a root (unlink freed it if need be), or the parent leaves next
	}
	if leaf != 0 {
		x.evAdd(leaf)
	} else if wasPinned {
		x.unpinFrom(p)
	}
}

// tierDropped detaches device node n from its lower-tier entry, which stays while a lower
// tier holds a copy. EvictBlocks calls it only with nothing in flight, so n is no copy's
// source and no demotion's.
func (x *Index) tierDropped(n int32) {
	ts := x.tiers
	e := ts.devEnt[n] - 1
	if e < 0 {
		return
	}
	ts.devEnt[n] = 0
	ts.ents[e].dev = 0
	ts.freeEntryIfEmpty(e)
}
