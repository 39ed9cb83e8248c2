package prefix

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
)

// Only unreferenced leaves are evictable, so every cached path stays a valid prefix. The
// evictable set is kept incrementally: a leaf enters it when its last request reference
// goes, and a parent enters it when its last child is evicted, with its own older last
// access (not the time it became a leaf). The default order is LRU by last use on a logical
// clock, ties by block ID: every Acquire and Commit touches the blocks involved (one tick
// per call), Release touches them from last to first (one tick each, so a request's tail is
// older than its head, as vLLM frees in reverse), and Peek touches nothing. The default
// policy is evict.NewLRU over block IDs; WithPolicy plugs in any other evict.Factory. The pool's free list
// is always used before anything is evicted.
//
// Reclaimable is exact: it is the number of cached blocks no request holds and that lie
// above no held block, kept as a count of "pinned" blocks (held, or with a pinned child)
// updated when a block's pin state changes, which costs O(1) amortized per block along a
// request's path.
//
// The eviction set is exactly the unreferenced cached leaves (cached, not pinned, no
// child), kept in x.policy keyed by block ID. The index knows from a node's own flags
// whether it is in the set, so it asks the policy only to change the set, never to test it:
// along a hit path, Acquire pays no call for the blocks above the leaf.

// evictable reports whether block node nd is in the eviction set.
func evictable(nd *node) bool {
	return nd.flags&(flagCached|flagPinned) == flagCached && nd.children == 0
}

// evictEntry describes block node n as an eviction candidate.
func (x *Index) evictEntry(n int32) evict.Entry {
	nd := &x.nodes[n]
	e := evict.Entry{Key: int32(blockOf(n)), LastAccess: nd.lastAccess, Hits: x.nodes[n].hits, Priority: nd.prio}
	if x.until != nil {
		e.PriorityUntil = x.until[n]
	}
	return e
}

// evAdd puts node n (which just became an unreferenced leaf, or was touched as one) into
// the eviction set, or re-ranks it there. The default LRU is told the key and last access
// alone: the key and the time on the node's line.
func (x *Index) evAdd(n int32) {
	if x.chain != nil {
		x.chain.AddAt(int32(blockOf(n)), x.nodes[n].lastAccess)
		return
	}
	x.policy.Add(x.evictEntry(n))
}

// evRemoveSlow takes node n, an unreferenced leaf, out of the eviction set: call it before
// n gains a child or a pin. Callers test evictable (or what they know of n's flags) in line
// first, so that the common case (not in the set: along a hit path, only the leaf is)
// makes no call; it stays out of line so that those tests stay small enough to inline.
//
//go:noinline
func (x *Index) evRemoveSlow(n int32) { x.policy.Remove(int32(blockOf(n))) }

// Evict evicts up to n evictable cached blocks, in policy order, and returns how many.
// A parent whose last child leaves becomes a candidate at once, with its own last access,
// so Evict(n) can free a whole unreferenced path.
func (x *Index) Evict(n int) int {
	got := x.evictUpTo(n)
	x.mutated()
	return got
}

// Reclaimable is the number of cached blocks that repeated leaf eviction can free now:
// the cached blocks that no request holds and that lie above no block a request holds.
func (x *Index) Reclaimable() int { return x.cached - x.pinned }

// ReclaimableOf counts the blocks of ids that are reclaimable now: for a path from a
// namespace root, as Peek returns, exactly what Acquire(ids) would take off Reclaimable,
// which is what an admission check must subtract from the pool's Available. Blocks that
// are not cached count for nothing.
func (x *Index) ReclaimableOf(ids []blocks.ID) int {
	n := 0
	nodes, nb := x.nodes, x.nb
	for _, id := range ids {
		if uint(id) < uint(nb) && nodes[nodeOf(id)].flags&(flagCached|flagPinned) == flagCached {
			n++
		}
	}
	return n
}

// reclaimer is the index as its pool's blocks.Reclaimer: the pool's Reclaim(n) is the
// index's Evict(n), so that the index does not export the same call under two names.
type reclaimer struct{ x *Index }

func (r reclaimer) Reclaimable() int  { return r.x.Reclaimable() }
func (r reclaimer) Reclaim(n int) int { return r.x.Evict(n) }

// ReclaimInto is the pool's handoff (internal/poolrefs.Handoff): it evicts len(dst)
// blocks as Reclaim(len(dst)) would and writes their IDs into dst instead of releasing
// them, each keeping the reference the index held, which becomes the allocation's. That
// reference must be the block's only one: evictInto checks it of each victim before it
// changes anything of it (nodeOfVictim).
func (r reclaimer) ReclaimInto(dst []blocks.ID) int {
	x := r.x
	var ids []blocks.ID
	if len(dst) == 1 && x.plainEviction() {
		ids = x.evictOne(dst[:0])
	} else {
		ids = x.evictInto(dst[:0], len(dst))
	}
	if len(ids) == 0 {
		return 0
	}
	x.evicted(ids)
	x.mutated()
	return len(ids)
}

// ReclaimOne is ReclaimInto for a one-block dst (poolrefs.Handoff), the pool's every
// allocation in a full cache on a decode step: the same victim and writes, no slice.
func (r reclaimer) ReclaimOne() (blocks.ID, bool) {
	x := r.x
	if !x.plainEviction() {
		return r.reclaimOneSlow()
	}
	id, ok := x.evictLeaf()
	if !ok {
		return 0, false
	}
	x.stats.evictions++ // evicted: no observer to tell (plainEviction)
	x.mutated()
	return id, true
}

// reclaimOneSlow is ReclaimOne through ReclaimInto, for an index with ghost history, an
// observer or lower tiers; its one-element buffer escapes through evictInto, so it is kept
// off ReclaimOne's frame.
func (r reclaimer) reclaimOneSlow() (blocks.ID, bool) {
	var one [1]blocks.ID
	if r.ReclaimInto(one[:]) == 0 {
		return 0, false
	}
	return one[0], true
}

// plainEviction reports whether an eviction needs none of evictInto's optional steps: no
// ghost history, no observer's hashes, no lower tiers.
func (x *Index) plainEviction() bool {
	return x.obs == nil && x.tiers == nil && !x.ctl.ghost.on()
}

// evictOne is evictLeaf appending its victim to ids: ReclaimInto's one-block dst.
func (x *Index) evictOne(ids []blocks.ID) []blocks.ID {
	if id, ok := x.evictLeaf(); ok {
		return append(ids, id)
	}
	return ids
}

// evictLeaf is evictInto(ids, 1) when plainEviction holds, returning its victim (no
// slice): a decode step's allocation in a full cache, which takes one block and so evicts
// one leaf, whose parent, if it is left an unreferenced leaf, becomes a candidate. The
// same victim, the same calls on the policy and the same writes as evictInto; written
// apart because evictInto's loop, with a call for each optional step, keeps every value
// it carries on the stack across them (about 200 instructions a call where this takes a
// few dozen).
func (x *Index) evictLeaf() (blocks.ID, bool) {
	k, ok := x.policy.Victim()
	if !ok {
		return 0, false
	}
	id := blocks.ID(k)
	nd := x.nodeOfVictim(id)
	if x.refs[id] != 1 {
		x.evAdd(nodeOf(id)) // see evictInto
		panic("kvpage: broken invariant: an evictable block is held outside the index")
	}
	if p := x.unlink(nodeOf(id), nd); p != 0 {
		// Right after Victim: the LRU's parent-takes-the-root step (see evictInto). The
		// parent had a child, so it was no candidate (evictable).
		if x.chain != nil {
			x.chain.AddAfterVictim(int32(blockOf(p)), x.nodes[p].lastAccess)
		} else {
			x.policy.Add(x.evictEntry(p))
		}
	}
	return id, true
}

// evictUpTo pops up to n victims, unlinks them and returns their blocks to the pool in
// eviction order.
func (x *Index) evictUpTo(n int) int {
	ids := x.evictInto(x.idBuf[:0], n)
	x.idBuf = ids
	if len(ids) == 0 {
		return 0
	}
	if err := x.pool.Release(ids...); err != nil {
		panic("kvpage: broken invariant: releasing evicted blocks failed: " + err.Error())
	}
	x.evicted(ids)
	return len(ids)
}

// evicted counts the blocks evictInto just took out of the index and reports them to the
// observer, whose hashes evictInto left in x.hashBuf.
func (x *Index) evicted(ids []blocks.ID) {
	x.stats.evictions += uint64(len(ids))
	if x.obs != nil {
		x.emitRemoved(ids, x.hashBuf)
	}
}

// evictInto pops up to n victims, unlinks them and appends their blocks to ids in eviction
// order (the observer's hashes go to x.hashBuf); the blocks keep the index's reference.
// Appends stay within ids' capacity when it has room for n.
func (x *Index) evictInto(ids []blocks.ID, n int) []blocks.ID {
	hashes := x.hashBuf[:0]
	ghost, obs, tiers := x.ctl.ghost.on(), x.obs != nil, x.tiers != nil
	if n <= 0 {
		x.hashBuf = hashes
		return ids
	}
	k, ok := x.policy.Victim()
	for ok {
		id := blocks.ID(k)
		nd := x.nodeOfVictim(id)
		if x.refs[id] != 1 {
			// Held beyond the index's reference though not pinned: someone retained it
			// through the pool behind the index's back. Checked before anything of the
			// victim changes, which goes back into the eviction set: a handoff would give
			// the allocation a block another holder still uses.
			x.evAdd(nodeOf(id))
			panic("kvpage: broken invariant: an evictable block is held outside the index")
		}
		if ghost {
			x.recordEvicted(nodeOf(id))
		}
		if obs {
			hashes = x.appendHash(hashes, nodeOf(id))
		}
		if tiers {
			x.tierEvicted(nodeOf(id))
			if x.tiers.demoting != 0 { // some block is demoted: is it the parent?
				x.demotedLeft(nd.parent, len(ids)+1 < n)
			}
		}
		p := x.unlink(nodeOf(id), nd)
		ids = append(ids, id)
		more := len(ids) < n
		switch {
		case p != 0 && more && x.chain != nil:
			// The parent is a candidate now and, evicting a chain, usually the next
			// victim: one call adds it and pops the next (internal/evictfast).
			k, ok = x.chain.AddVictim(int32(blockOf(p)), x.nodes[p].lastAccess)
			continue
		case p != 0:
			// Right after Victim: evict.NewLRU lets the parent take the victim's place at
			// the top of its heap, one sift instead of a pop and a push.
			x.evAdd(p)
		}
		if !more {
			break
		}
		k, ok = x.policy.Victim()
	}
	x.hashBuf = hashes
	if tiers && len(x.tiers.follow) != 0 {
		x.settleFollow() // a demoted parent the policy did not take next
	}
	return ids
}

// nodeOfVictim checks that a policy's victim is an evictable leaf.
func (x *Index) nodeOfVictim(id blocks.ID) *node {
	if id < 0 || int(id) >= x.nb {
		panic("kvpage: broken invariant: eviction policy returned an unknown block")
	}
	nd := &x.nodes[nodeOf(id)]
	if nd.flags&(flagCached|flagPinned) != flagCached || nd.children != 0 {
		panic("kvpage: broken invariant: eviction policy returned a block that is not an unreferenced leaf")
	}
	return nd
}

// unlink removes leaf n from the tree and returns its parent if the parent is now an
// unreferenced leaf (a candidate, with its own older last access), else 0. The caller
// takes n out of the eviction set and adds the parent.
func (x *Index) unlink(n int32, nd *node) int32 {
	p := nd.parent
	if x.nodes[p].hint == n {
		x.nodes[p].hint = 0 // not in the table (see Index.nodes); the next commit or acquire under p sets it again
	} else {
		x.table.remove(n, nd.key)
	}
	if x.ctl.quota != nil {
		x.quotaRemoved(n)
	}
	if nd.flags&flagMM != 0 {
		delete(x.mm, n)
	}
	nd.flags, nd.prio = 0, 0 // no flagCached: cursors at n are stale (the next Commit bumps its gen)
	nd.parent = 0
	x.poisonFreed(n)
	x.cached--
	pn := &x.nodes[p]
	pn.children--
	if pn.children == 0 {
		if pn.flags&(flagCached|flagPinned) == flagCached {
			return p
		}
		if pn.flags&flagRoot != 0 {
			x.freeRoot(p) // the namespace has nothing cached left: see ensureRoot
		}
	}
	return 0
}

// Reset drops every cached block; it fails with ErrBlocksHeld while any request holds one,
// as vLLM's reset_prefix_cache does, and then changes nothing. Every namespace root is
// freed with its blocks: cursors at them are stale (see Cursor) and Commit recreates them.
func (x *Index) Reset() error {
	if x.pinned > 0 {
		return &HeldError{Held: x.pinned}
	}
	if k := x.PendingTransfers(); k > 0 {
		return fmt.Errorf("%w: %d transfers", ErrTransfersPending, k)
	}
	ids := make([]blocks.ID, 0, x.cached)
	for n := int32(1); int(n) <= x.nb; n++ {
		nd := &x.nodes[n]
		if nd.flags&flagCached == 0 {
			continue
		}
		ids = append(ids, blockOf(n))
		if x.ctl.ghost.on() {
			x.ctl.ghost.record(x.eventKey(n), x.clock.Now(), EvictReset)
		}
		*nd = node{gen: nd.gen, hits: nd.hits} // no flagCached: stale for cursors (see node)
		x.poisonFreed(n)
	}
	for r := int32(len(x.nodes) - 1); int(r) > x.nb; r-- { // downwards: the lowest slot is reused first
		if x.nodes[r].flags&flagRoot != 0 {
			x.nodes[r].children = 0
			x.freeRoot(r)
		}
	}
	x.table.clear()
	for n := range x.nodes {
		x.nodes[n].hint = 0
	}
	clear(x.mm)
	x.policy.Reset()
	if x.ctl.quota != nil {
		x.quotaReset()
	}
	x.cached = 0
	if x.tiers != nil {
		x.resetTiers() // every tier: vLLM's reset skips its CPU tier (vLLM issue #57727)
	}
	if err := x.pool.Release(ids...); err != nil {
		panic("kvpage: broken invariant: releasing cached blocks on reset failed: " + err.Error())
	}
	x.stats.dropped += uint64(len(ids))
	if x.obs != nil {
		x.obs.AllBlocksCleared()
	}
	x.mutated()
	return nil
}
