package prefix

// Weight epochs. After a weight update a namespace's cached KV is wrong, yet requests may
// still hold some of it, and vLLM's reset_prefix_cache refuses until every block is free.
// BumpEpoch instead retires the namespace's root: the root leaves the namespace map, so
// no lookup reaches its blocks from that moment, and they stay where they are, evictable
// by the policy like any unheld block, until the pool needs them. The next Commit of the
// namespace creates a fresh root whose keys fold the new epoch in with the salt, so no key
// of the new tree equals one of the old. A cursor into the retired tree is refused by
// Commit (ErrInvalidCursor): KV computed with the old weights is never cached again (the
// Manager's BumpEpoch stops its running sequences of the namespace from committing). A
// retired root freed by its last block's eviction becomes a tombstone slot, never reused,
// so that no stale cursor can ever resolve under a later root in its place: one node per
// bump that had a root.

const tagEpoch = 0x2545f4914f6cdd1d

// epochMix folds ns's current epoch into a new root's key material.
func (c *control) epochMix(ri *rootInfo) {
	if c.epochs == nil {
		return
	}
	if e := c.epochs[ri.ns]; e != 0 {
		ri.epoch = e
		ri.salt = mixExtra(ri.salt, tagEpoch, uint64(e))
		ri.hasSa = true
	}
}

// BumpEpoch starts a new weight epoch for ns and returns its number (1 for the first
// bump). Its cached blocks become unreachable at once and evictable lazily; blocks that
// requests hold stay theirs. It is O(1) and works whatever is held.
func (x *Index) BumpEpoch(ns Namespace) uint32 {
	c := &x.ctl
	if c.epochs == nil {
		c.epochs = make(map[Namespace]uint32)
	}
	c.epochs[ns]++
	e := c.epochs[ns]
	if x.tiers != nil {
		x.tiers.gen++ // a lower-tier walk kept from before used the old epoch's keys
	}
	if r := x.rootOf(ns); r != 0 {
		x.root(r).retired = true
		c.retiredLive++
		delete(x.roots, ns)
		if ns == (Namespace{}) {
			x.defRoot = 0
		}
	}
	x.mutated()
	return e
}

// Epoch is ns's current weight epoch (0 before any bump).
func (x *Index) Epoch(ns Namespace) uint32 {
	if x.ctl.epochs == nil {
		return 0
	}
	return x.ctl.epochs[ns]
}

// tombstone retires slot r for good: its retired root lost its last block.
func (x *Index) tombstone(r int32, gen uint64) {
	x.nodes[r] = node{gen: gen}
	x.ctl.retiredLive--
	x.ctl.tombs++
}

// retiredRootOf returns the root above block node n if it is retired, else 0. It walks up
// the tree: the eviction history calls it only while a retired root lives.
func (x *Index) retiredRootOf(n int32) int32 {
	for x.isBlock(n) {
		n = x.nodes[n].parent
	}
	if x.isRootSlot(n) && x.root(n).retired {
		return n
	}
	return 0
}

// explainEpoch says whether block m of p's namespace is still cached under the previous
// weight epoch: a walk of the prompt's first m+1 blocks with the old epoch's keys through
// its retired root. It costs O(m) hashes, on a miss only, and only for a bumped namespace.
// (A block of an earlier epoch evicted since is in the eviction history as EvictEpoch:
// event hashes, which the history keys on, do not depend on the epoch.)
func (x *Index) explainEpoch(p *Prompt, m int) (MissReason, EvictCause, uint64) {
	e := x.Epoch(p.Namespace)
	if e == 0 {
		return MissNone, EvictNone, 0
	}
	old := baseRootInfo(p.Namespace)
	if e > 1 {
		old.salt = mixExtra(old.salt, tagEpoch, uint64(e-1))
		old.hasSa = true
	}
	// The retired root of the previous epoch, if it still has blocks.
	var r int32
	for i := range x.rootInfo {
		ri := &x.rootInfo[i]
		if ri.retired && ri.epoch == e-1 && ri.ns == p.Namespace && x.nodes[x.nb+1+i].flags&flagRoot != 0 {
			r = int32(x.nb + 1 + i)
		}
	}
	if r == 0 {
		return MissNone, EvictNone, 0
	}
	at, key, mmLo := r, x.nodes[r].key, 0
	for b := 0; b <= m; b++ {
		toks := p.Tokens[b*x.bs : (b+1)*x.bs]
		var mm []mmKey
		if len(p.MM) > 0 {
			mm = x.blockMM(p, b, &mmLo)
		}
		key = x.childKey(key, toks, &old, b == 0, mm)
		if at != 0 {
			at = x.findChild(at, key, toks, mm)
		}
		if at == 0 {
			return MissNone, EvictNone, 0
		}
	}
	return MissEpoch, EvictNone, 0
}
