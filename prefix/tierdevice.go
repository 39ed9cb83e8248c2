package prefix

import "github.com/kvpage/kvpage/blocks"

// The device's side of the tiers, for maintainers. Three hooks in the tree's paths, each
// behind one nil check: insertChain (tierCommitted: a committed block finds its entry, a
// promotion, or starts a write-through copy), Acquire (tierAcquired: a block reaching
// WriteAfterHits' threshold starts its copy) and evictUpTo (tierEvicted: the device copy
// goes; the entry stays while a lower tier holds it). A device block being copied out
// holds one more pool reference (devRefs) and is pinned like a block a request holds, so
// that neither eviction nor the pool's reuse can take it; a write-back demotion also
// marks it flagDemote, and CompleteTransfer evicts it once its copy is confirmed.

// flagDemote marks a device block whose write-back demotion is in flight: it is evicted
// when the copy completes (if nothing holds it or lies under it by then).
const flagDemote uint8 = 1 << 5

// tierable reports whether device node n may go to the lower tiers: not under a root an
// epoch bump retired (its keys are never looked up again). A multimodal block is tiered
// as any other: its entry keeps the hash of its extra keys (tierEntry.mmh).
func (x *Index) tierable(n int32) bool {
	return x.ctl.retiredLive == 0 || x.retiredRootOf(n) == 0
}

// tierCommitted runs for the blocks insertChain just cached.
func (x *Index) tierCommitted(ids []blocks.ID) {
	ts := x.tiers
	spec := &ts.lv[0].spec
	through := spec.Write == WriteThrough || (spec.Write == WriteAfterHits && spec.Hits <= 1)
	for _, id := range ids {
		n := nodeOf(id)
		if e := x.nodeEntry(n); e >= 0 {
			en := &ts.ents[e]
			if en.dev == 0 { // a promotion: the device holds the block again
				en.dev = n
				ts.devEnt[n] = e + 1
				x.nodes[n].hits = max(x.nodes[n].hits, en.hits)
			}
			continue
		}
		if through && x.tierable(n) {
			x.startDeviceStore(n, false)
		}
	}
}

// tierAcquired runs for the blocks Acquire just took: WriteAfterHits copies a block down
// once its hits reach the threshold, and a demoted block taken again stays.
func (x *Index) tierAcquired(ids []blocks.ID) {
	ts := x.tiers
	spec := &ts.lv[0].spec
	for _, id := range ids {
		n := nodeOf(id)
		if nd := &x.nodes[n]; nd.flags&flagDemote != 0 && ts.devRefs[id] == 0 {
			nd.flags &^= flagDemote // taken again before its child's demotion evicted it
			ts.demoting--
		}
		if spec.Write == WriteAfterHits && x.nodes[n].hits == spec.Hits && ts.devEnt[n] == 0 {
			// Started by the next TakePlans: reserving a slot now could evict a block an
			// admission found in the tier and is about to load.
			ts.hitQueue = append(ts.hitQueue, hitMark{n: n, gen: x.nodes[n].gen})
		}
	}
}

// hitMark is a device block that reached WriteAfterHits' threshold, with its
// generation then (a block evicted and reused since is skipped).
type hitMark struct {
	n   int32
	gen uint64
}

// startHitStores starts the copies of the blocks that reached the hit threshold.
func (x *Index) startHitStores() {
	ts := x.tiers
	for _, h := range ts.hitQueue {
		nd := &x.nodes[h.n]
		if x.nodes[h.n].gen == h.gen && nd.flags&flagCached != 0 && ts.devEnt[h.n] == 0 && x.tierable(h.n) && x.pool.RefCount(blockOf(h.n)) > 1 {
			x.startDeviceStore(h.n, false)
		}
	}
	ts.hitQueue = ts.hitQueue[:0]
}

// tierEvicted runs for a device block the tree is evicting (before unlink).
func (x *Index) tierEvicted(n int32) {
	ts := x.tiers
	ts.stats[Device].Evicted++
	if x.nodes[n].flags&flagDemote != 0 {
		ts.demoting--
	}
	e := ts.devEnt[n] - 1
	if e < 0 {
		ts.stats[Device].Lost++
		return
	}
	ts.devEnt[n] = 0
	en := &ts.ents[e]
	en.dev = 0
	// A StreamOrdered demotion evicts its block while its copy into tier 1 is in flight.
	inFlight := ts.cfg.StreamOrdered && en.st[0] == slotPending && !en.leaving[0]
	if en.bestTier() == 0 && !inFlight {
		ts.stats[Device].Lost++
	}
	ts.freeEntryIfEmpty(e)
}

// startDeviceStore prepares the copy of device node n into tier 1: an entry (made if
// need be), a reserved slot, a pin and a pool reference on the block. demote marks a
// write-back demotion (n was just popped from the eviction set). It reports whether the
// copy was prepared.
func (x *Index) startDeviceStore(n int32, demote bool) bool {
	ts := x.tiers
	e := ts.devEnt[n] - 1
	made := false
	if e < 0 {
		if e = x.newEntryFromNode(n); e < 0 {
			return false
		}
		made = true
	}
	if ts.ents[e].slot[0] != 0 || !x.reserve(1, e) {
		if made {
			ts.freeEntryIfEmpty(e)
		}
		return false
	}
	id := blockOf(n)
	if err := x.pool.Retain(id); err != nil {
		panic("kvpage: broken invariant: retaining a cached block for a copy failed: " + err.Error())
	}
	ts.devRefs[id]++
	x.pin(n) // a no-op for a block a request holds; a popped victim is pinned here
	if demote && x.nodes[n].flags&flagDemote == 0 {
		x.nodes[n].flags |= flagDemote
		ts.demoting++
	}
	ts.queue = append(ts.queue, tierOp{from: Device, to: 1, e: e, src: int32(id), dst: ts.ents[e].slot[0] - 1})
	return true
}

// devUnpin drops the pool reference an in-flight copy held on device block id. For a
// store's source (cached) the block is unpinned as Release would, and a demoted block is
// evicted once nothing holds it and nothing lies under it (evictPopped then takes its
// demoted parents too); a load's destination is not cached yet and goes back to the pool
// if its request has gone.
func (x *Index) devUnpin(id blocks.ID, cached bool) {
	ts := x.tiers
	ts.devRefs[id]--
	if err := x.pool.Release(id); err != nil {
		panic("kvpage: broken invariant: releasing a copy's block failed: " + err.Error())
	}
	if !cached {
		return
	}
	n := nodeOf(id)
	x.unpinFrom(n)
	x.settleDemotion(n)
}

// settleDemotion evicts device node n if it is demoted, no copy holds it any more and
// nothing holds it nor lies under it (evictPopped then takes its demoted parents too); a
// demoted block a request took meanwhile stays, no longer demoted. One with a demoted
// child under it stays demoted: evicting that child evicts it.
func (x *Index) settleDemotion(n int32) {
	ts := x.tiers
	nd := &x.nodes[n]
	id := blockOf(n)
	if nd.flags&flagDemote == 0 || ts.devRefs[id] != 0 {
		return
	}
	switch {
	case evictable(nd):
		x.policy.Remove(int32(id))
		x.evictPopped(n)
	case x.pool.RefCount(id) > 1: // a request took it meanwhile: it stays
		nd.flags &^= flagDemote
		ts.demoting--
	}
}

// releaseStreamSource drops the pool reference a StreamOrdered store held on its device
// source id as TakePlans hands the store out (TierConfig.StreamOrdered). The block is
// reusable from now on, but it keeps its KV until an allocation takes it: a demoted one
// stays cached and demoted, an eviction candidate at its place in the eviction order
// (its demotion popped it as the next victim, so it is first, or nearly so). The next
// allocation that needs a block evicts it, its copy counted in flight, not lost; if none
// does before the copy completes, CompleteTransfer evicts it once the copy is confirmed,
// or keeps it cached, ranked as released now, if the copy failed (settleStreamSource).
// A demoted block a request took meanwhile is no longer demoted.
func (x *Index) releaseStreamSource(id blocks.ID) {
	ts := x.tiers
	ts.devRefs[id]--
	if err := x.pool.Release(id); err != nil {
		panic("kvpage: broken invariant: releasing a copy's block failed: " + err.Error())
	}
	n := nodeOf(id)
	x.unpinFrom(n)
	if nd := &x.nodes[n]; nd.flags&flagDemote != 0 && ts.devRefs[id] == 0 && x.pool.RefCount(id) > 1 {
		nd.flags &^= flagDemote
		ts.demoting--
	}
}

// streamSourceKept reports whether device block src, the source of a StreamOrdered store
// of entry e whose TakePlans released it, is still that block on the device and demoted
// with no copy holding it: the KV the store read, kept since (releaseStreamSource).
func (x *Index) streamSourceKept(src, e int32) bool {
	ts := x.tiers
	n := nodeOf(blocks.ID(src))
	return ts.devEnt[n]-1 == e && x.nodes[n].flags&flagDemote != 0 && ts.devRefs[src] == 0
}

// keepStreamFailed is keepFailedDemotion for a StreamOrdered store of entry e from device
// block src that failed (called before its destination slot is dropped, which may free
// e): if the block is still on the device, it stays cached, no longer demoted, ranked as
// released now; if the device evicted it meanwhile (counted then as in flight, not lost)
// and no other lower tier holds it, its KV is lost now, and the device's Lost counts it.
func (x *Index) keepStreamFailed(src, e int32) {
	ts := x.tiers
	if x.streamSourceKept(src, e) {
		n := nodeOf(blocks.ID(src))
		nd := &x.nodes[n]
		nd.flags &^= flagDemote
		ts.demoting--
		nd.lastAccess = x.tick()
		if evictable(nd) {
			x.evAdd(n) // re-ranked as released now
		}
		return
	}
	if en := &ts.ents[e]; en.dev == 0 && en.bestTier() == 0 {
		ts.stats[Device].Lost++
	}
}

// keepFailedDemotion keeps device block id cached after its demotion's copy failed (its
// last copy in flight): it still holds its KV, so it is no longer demoted, and it goes
// back to the eviction set as a block released now, last in LRU order. vLLM frees the
// blocks a store read when the store's job finishes, whatever the outcome, to the free
// queue's tail. At the front it would be the next victim, its KV lost with no copy in any
// tier, and the next TakePlans would retry its failing copy first.
func (x *Index) keepFailedDemotion(id blocks.ID) {
	ts := x.tiers
	nd := &x.nodes[nodeOf(id)]
	if nd.flags&flagDemote == 0 || ts.devRefs[id] != 1 {
		return
	}
	nd.flags &^= flagDemote
	ts.demoting--
	nd.lastAccess = x.tick()
}

// hasLowerCopy reports whether a lower tier holds device node n's block.
func (x *Index) hasLowerCopy(n int32) bool {
	e := x.tiers.devEnt[n] - 1
	return e >= 0 && x.tiers.ents[e].bestTier() != 0
}

// demoteAhead starts write-back demotions of the device's next victims while free blocks
// plus blocks being demoted are below the watermark. A victim with a copy below already is
// evicted at once, one that cannot be tiered too; the others are copied down, and the
// ancestors that only the victim keeps in the tree follow it in the same plan (leaf-only
// eviction would otherwise demote a chain one block per round trip).
func (x *Index) demoteAhead() {
	ts := x.tiers
	if ts.cfg.FreeTarget == 0 || ts.lv[0].spec.Write != WriteBack {
		return
	}
	short := func() bool { return x.pool.NumFree()+ts.demoting < ts.cfg.FreeTarget }
	for short() {
		k, ok := x.policy.Victim()
		if !ok {
			return
		}
		n := nodeOf(blocks.ID(k))
		x.nodeOfVictim(blocks.ID(k))
		if x.hasLowerCopy(n) || !x.tierable(n) || !x.startDeviceStore(n, true) {
			x.evictPopped(n)
			continue
		}
		for p := x.nodes[n].parent; short() && x.isBlock(p); p = x.nodes[p].parent {
			pn := &x.nodes[p]
			// Held by nothing but the index and the demoted child below it.
			if pn.children != 1 || pn.pinnedKids != 1 || pn.flags&flagDemote != 0 || x.pool.RefCount(blockOf(p)) != 1 {
				break
			}
			if x.hasLowerCopy(p) {
				pn.flags |= flagDemote // no copy needed: evicted after its child
				ts.demoting++
				continue
			}
			if !x.tierable(p) || !x.startDeviceStore(p, true) {
				break
			}
		}
	}
}

// demotedLeftBy reports whether device node p, the parent of an unreferenced leaf about
// to be evicted, is a demoted block that this eviction leaves an unreferenced leaf with
// no copy in flight, which evictPopped evicts along with its child (demotedLeft).
func (x *Index) demotedLeftBy(p int32) bool {
	pn := &x.nodes[p]
	return pn.flags&(flagCached|flagPinned|flagDemote) == flagCached|flagDemote && pn.children == 1 &&
		x.tiers.devRefs[blockOf(p)] == 0
}

// demotedLeft readies demoted node p, whose child an eviction pass is about to evict, if
// demotedLeftBy(p): that eviction leaves p a leaf and puts it into the eviction set. The
// exact rule, under every eviction policy: when the pass has room for it (more) and its
// policy takes it as the pass's next victim, it goes with its child, as evictPopped takes
// it; otherwise it stays cached, a candidate at its own last access, no longer demoted:
// its KV is in a lower tier or on its way there, and the device's Pending counts no
// demotion that is not under way. To be taken next it is ranked first (its last access 0
// for the pass), which the default LRU and any policy that orders by last access first
// honour; a policy that ranks otherwise (MRU, LFU, priorities) may take another victim
// in its place, and the pass's end (settleFollow) then keeps it as above, ranked at its
// own last access again. Forcing it to be the next victim whatever the policy says would
// cost the eviction loop itself, W3's included, about 0.6% (measured twice: bench/README,
// tierfix2 and tier8). (Before, it went back into the set still demoted: Pending counted
// it until some later eviction reached it.) Out of line: evictInto calls it only while
// some block is demoted.
//
//go:noinline
func (x *Index) demotedLeft(p int32, more bool) {
	if !x.demotedLeftBy(p) {
		return
	}
	if more {
		x.tiers.follow = append(x.tiers.follow, followMark{n: p, lastAccess: x.nodes[p].lastAccess})
		x.nodes[p].lastAccess = 0
		return
	}
	x.nodes[p].flags &^= flagDemote
	x.tiers.demoting--
}

// followMark is a demoted parent demotedLeft ranked first, with the last access it had.
type followMark struct {
	n          int32
	lastAccess uint64
}

// settleFollow ends an eviction pass whose demotedLeft ranked demoted parents first: one
// the pass did not evict (its policy took another victim) stays cached, no longer demoted,
// ranked at its own last access again.
//
//go:noinline
func (x *Index) settleFollow() {
	ts := x.tiers
	for _, f := range ts.follow {
		nd := &x.nodes[f.n]
		if nd.flags&(flagCached|flagDemote) != flagCached|flagDemote || nd.lastAccess != 0 {
			continue // evicted by the pass (unlink cleared its flags), or taken since
		}
		nd.flags &^= flagDemote
		ts.demoting--
		wasCandidate := evictable(nd)
		if wasCandidate {
			x.evRemoveSlow(f.n)
		}
		nd.lastAccess = f.lastAccess
		if wasCandidate {
			x.evAdd(f.n)
		}
	}
	ts.follow = ts.follow[:0]
}

// evictPopped evicts device node n, an unreferenced leaf already taken off the eviction
// set, as evictUpTo evicts each victim; a demoted parent left a leaf with no copy in
// flight goes with it.
func (x *Index) evictPopped(n int32) {
	for n != 0 {
		nd := &x.nodes[n]
		if x.ctl.ghost.on() {
			x.recordEvicted(n)
		}
		var hashes []byte
		if x.obs != nil {
			hashes = x.appendHash(x.hashBuf[:0], n)
		}
		x.tierEvicted(n)
		p := x.unlink(n, nd)
		id := blockOf(n)
		if err := x.pool.Release(id); err != nil {
			panic("kvpage: broken invariant: releasing an evicted block failed: " + err.Error())
		}
		x.stats.evictions++
		if x.obs != nil {
			x.hashBuf = hashes
			x.idBuf = append(x.idBuf[:0], id)
			x.emitRemoved(x.idBuf, hashes)
		}
		n = 0
		if p != 0 {
			if x.nodes[p].flags&flagDemote != 0 && x.tiers.devRefs[blockOf(p)] == 0 {
				n = p
			} else {
				x.evAdd(p)
			}
		}
	}
}

// Demote prepares the copy into tier 1 of each block of ids that is cached, held by one
// caller besides the index, not being copied and not in a lower tier yet, and marks it
// demoted: once its copy is confirmed and nothing holds it, it leaves the device. It is
// how a sequence swapped out into the tiers keeps its KV (blocktable.Manager's Swap mode
// without a host pool), whatever the tier's write policy. It returns how many copies it
// prepared (TakePlans hands them out); a block the tier has no room for stays cached on
// the device as any other.
func (x *Index) Demote(ids []blocks.ID) int {
	if x.tiers == nil {
		return 0
	}
	k := 0
	for _, id := range ids {
		if uint(id) >= uint(x.nb) || !x.IsCached(id) || x.pool.RefCount(id) != 2 || x.tiers.devRefs[id] != 0 {
			continue
		}
		n := nodeOf(id)
		if x.nodes[n].flags&flagDemote != 0 || x.hasLowerCopy(n) || !x.tierable(n) {
			continue
		}
		if x.startDeviceStore(n, true) {
			k++
		}
	}
	x.mutated()
	return k
}
