package prefix

import (
	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/trusted"
)

// A GroupTree entry's residency is a Tier (tier.go). The device's entries are lists per
// (node, group) over device block IDs (res, here: several blocks may cache one prefix,
// and lookups take the first); the lower tiers' (grouptree_tiers.go) hold at most one
// copy per (node, group) in a slot of their own, counted as one of the node's entries, so
// that a node lives while any tier has an entry for it: demoting a device block is a
// store into a lower slot and the device entry's Uncache, and the prefix stays. Lookups
// that take device blocks (First) read only the device's lists; a tiered lookup reads
// LowerTier where they stop. groupTiers counts the residencies kept as lists: the
// device's.
const groupTiers = 1

// residency is one tier's entries.
type residency struct {
	head, tail []int32  // per (node, group): the first and last entry's ID, 0 = none
	ent        []gentry // per ID of the tier
	cached     []int    // entries per group
	prefixes   []int    // (node, group) lists that are not empty, per group
}

// gentry is what an ID of a tier caches: its node (0 = not cached), its group, and the
// next ID cached under the same (node, group), in the order they were cached.
type gentry struct {
	node  Node
	next  int32
	group uint8
}

func (r *residency) init(ids, groups, nodes int) {
	r.ent = make([]gentry, ids)
	r.head = make([]int32, groups, nodes*groups)
	r.tail = make([]int32, groups, nodes*groups)
	r.cached = make([]int, groups)
	r.prefixes = make([]int, groups)
}

func (r *residency) addNode(groups int) {
	for range groups {
		r.head = append(r.head, 0)
		r.tail = append(r.tail, 0)
	}
}

// GroupEntry says what a cached block is: the node (prefix) and group it is cached for,
// and its residency.
type GroupEntry struct {
	Node  Node
	Group int
	Tier  Tier
}

func init() {
	trusted.GroupHeads = func(t any) *[]int32 { return &t.(*GroupTree).res[Device].head }
}

// First returns the first device block cached for group g at node n (the one a lookup
// takes: vLLM keeps later blocks cached under a key that already has one, and reads the
// first), or blocks.NullID when the group has none there. A node or a group out of range
// (negative, NoNode, a node slot the tree never made, g at or past Groups()) has none
// either: First returns blocks.NullID, never reading another (node, group)'s list nor
// panicking. It is a lookup's inner step (once per block and group of every match): the
// check costs one unsigned compare for g, and for n the bounds check the read makes
// anyway. Entry and Gone are the other checked readers.
func (t *GroupTree) First(n Node, g int) blocks.ID {
	head := t.res[Device].head
	// With uint(g) < ng, i < len(head) keeps a negative n out too: int(n)*ng+g < 0 wraps.
	if i := uint(int(n)*t.ng + g); uint(g) < uint(t.ng) && i < uint(len(head)) {
		return blocks.ID(head[i])
	}
	return blocks.NullID
}

// NextCached returns the device block cached after b under b's (node, group), or
// blocks.NullID when none is, b is not cached, or b is not a block of the pool (the null
// block, a negative ID, one at or past the pool's size): it never panics nor reads
// another block's entry. The check replaces the read's own bounds check (one compare);
// the null block's entry is never written (CheckInvariants checks it), so it has no next.
func (t *GroupTree) NextCached(b blocks.ID) blocks.ID {
	// Indexing with the int i, not b, lets the compiler drop the read's bounds check and
	// keep one sign extension for the caller's later reads (W4's allocN: -0.14%).
	if ent, i := t.res[Device].ent, int(b); uint(i) < uint(len(ent)) {
		return blocks.ID(ent[i].next)
	}
	return blocks.NullID
}

// IsCached reports whether device block b is cached. An ID that is not a block of the
// pool (negative, at or past the pool's size) and the null block are not: IsCached
// returns false for them, never panicking. The check replaces the read's own bounds
// check (one compare), so blocktable/hybrid calls it per block on its hot paths.
func (t *GroupTree) IsCached(b blocks.ID) bool {
	if ent, i := t.res[Device].ent, int(b); uint(i) < uint(len(ent)) {
		return ent[i].node != 0
	}
	return false
}

// Entry returns device block b's entry, and whether b is cached. IDs outside the pool are
// not cached.
func (t *GroupTree) Entry(b blocks.ID) (GroupEntry, bool) {
	r := &t.res[Device]
	if b <= blocks.NullID || int(b) >= len(r.ent) || r.ent[b].node == 0 {
		return GroupEntry{}, false
	}
	e := r.ent[b]
	return GroupEntry{Node: e.node, Group: int(e.group), Tier: Device}, true
}

// Cache records device block b as cached for group g at node n, behind any block the
// (node, group) has already (it then counts as a duplicate, and lookups keep taking the
// first). The caller keeps b's reference count: the tree holds none. It fails, changing
// nothing, with ErrAlreadyCached for a block cached already and ErrInvalidArgument for the
// null block, an ID outside the pool, a group out of range or a node that is not a live
// prefix node (a namespace root caches nothing).
func (t *GroupTree) Cache(b blocks.ID, n Node, g int) error {
	r := &t.res[Device]
	// One unsigned compare per range (0 and negatives wrap to large), then the node and the
	// entry, which the update touches anyway.
	if uint(b)-1 >= uint(len(r.ent))-1 || uint(g) >= uint(t.ng) || uint(n)-1 >= uint(len(t.nodes))-1 {
		return &BlockError{Op: "cache", ID: b, Err: ErrInvalidArgument}
	}
	x := &r.ent[b]
	if nd := &t.nodes[n]; nd.parent == NoNode || nd.root || x.node != 0 {
		return t.cacheError(b, n)
	}
	i := t.link(r, x, b, n, g)
	if t.ev != nil && r.head[i] == int32(b) {
		t.emitOne(b, n, g, "")
	}
	return nil
}

// CacheChain caches a run of one group's blocks along a path: ids[i] for group g at
// path[(i+1)*k-1], where k is the group's block size in match units (a block is cached
// at the node of its last unit); null entries are skipped. It is Cache for each block,
// in order, in one call, and all or nothing: it fails, changing nothing, if any block
// would fail Cache, appears twice, or path is too short.
func (t *GroupTree) CacheChain(g int, ids []blocks.ID, path []Node, k int) error {
	r := &t.res[Device]
	if uint(g) >= uint(t.ng) || k <= 0 || len(path)/k < len(ids) || t.ev != nil && t.ev.k[g] != k {
		return &BlockError{Op: "cache", Err: ErrInvalidArgument}
	}
	for i, b := range ids {
		if b == blocks.NullID {
			continue
		}
		n := path[(i+1)*k-1]
		if uint(b)-1 >= uint(len(r.ent))-1 || uint(n)-1 >= uint(len(t.nodes))-1 {
			t.undoChain(g, ids[:i], path, k)
			return &BlockError{Op: "cache", ID: b, Err: ErrInvalidArgument}
		}
		x := &r.ent[b]
		nd := &t.nodes[n]
		if nd.parent == NoNode || nd.root || x.node != 0 {
			t.undoChain(g, ids[:i], path, k)
			return t.cacheError(b, n)
		}
		t.link(r, x, b, n, g)
	}
	if t.ev != nil {
		t.emitChains(g, ids, path, k)
	}
	return nil
}

// link appends b (entry x of r, checked by the caller) to the list of (n, g) and counts
// it, a duplicate if the list had a block already; it returns the list's index.
func (t *GroupTree) link(r *residency, x *gentry, b blocks.ID, n Node, g int) int {
	x.node, x.group, x.next = n, uint8(g), 0
	i := int(n)*t.ng + g
	if last := r.tail[i]; last != 0 {
		r.ent[last].next = int32(b)
		t.duplicates++
	} else {
		r.head[i] = int32(b)
		r.prefixes[g]++
	}
	r.tail[i] = int32(b)
	t.nodes[n].entries++
	r.cached[g]++
	return i
}

// emitChains reports the blocks CacheChain made the first of their (node, group), one
// event per run of consecutive ones.
func (t *GroupTree) emitChains(g int, ids []blocks.ID, path []Node, k int) {
	r := &t.res[Device]
	from := -1
	for i, b := range ids {
		if b != blocks.NullID && r.head[int(path[(i+1)*k-1])*t.ng+g] == int32(b) {
			if from < 0 {
				from = i
			}
			continue
		}
		if from >= 0 {
			t.emitChain(g, ids, path, k, from, i, "")
			from = -1
		}
	}
	if from >= 0 {
		t.emitChain(g, ids, path, k, from, len(ids), "")
	}
}

// undoChain takes back the entries CacheChain made for done, last first: each is the
// tail of its list, and its node was live before (so nothing is freed).
func (t *GroupTree) undoChain(g int, done []blocks.ID, path []Node, k int) {
	r := &t.res[Device]
	for i := len(done) - 1; i >= 0; i-- {
		b := done[i]
		if b == blocks.NullID {
			continue
		}
		n := path[(i+1)*k-1]
		j := int(n)*t.ng + g
		prev := int32(0)
		for c := r.head[j]; c != int32(b); c = r.ent[c].next {
			prev = c
		}
		if prev == 0 {
			r.head[j] = 0
			r.prefixes[g]--
		} else {
			r.ent[prev].next = 0
			t.duplicates--
		}
		r.tail[j] = prev
		r.ent[b] = gentry{}
		t.nodes[n].entries--
		r.cached[g]--
	}
}

// Gone returns why group g has no device block at node n: the cause its last one was
// removed with (UncacheAs), or EvictNone when it has one, never had one since the node
// was made, or lost it without a cause (and for groups past the third, which record none).
func (t *GroupTree) Gone(n Node, g int) EvictCause {
	i := int(n)*t.ng + g
	r := &t.res[Device]
	if uint(g) >= uint(t.ng) || uint(i) >= uint(len(r.head)) || r.head[i] != 0 {
		return EvictNone
	}
	if g >= goneGroups {
		return EvictNone
	}
	return t.nodes[n].gone[g]
}

// cacheError explains why b cannot be cached at n (a live node, in range).
func (t *GroupTree) cacheError(b blocks.ID, n Node) error {
	if uint(b)-1 >= uint(len(t.res[Device].ent))-1 || !t.isPrefixNode(n) {
		return &BlockError{Op: "cache", ID: b, Err: ErrInvalidArgument}
	}
	return &BlockError{Op: "cache", ID: b, Err: ErrAlreadyCached}
}

// Uncache removes device block b's entry (an eviction, or a block dropped on request) and
// frees its node, and the ancestors, that nothing keeps any more. It fails with
// ErrNotCached, changing nothing, for a block that is not cached. It records no cause:
// Gone then reports EvictNone, as for a block never stored.
func (t *GroupTree) Uncache(b blocks.ID) error { return t.UncacheAs(b, EvictNone) }

// UncacheAs is Uncache recording why the entry went (EvictPolicy for an eviction in free
// queue order, EvictWindow for a block a sliding window or Mamba state released
// mid-sequence and then evicted): if it empties its (node, group), Gone reports the cause
// while the node lives and the group has no block there, so that a lookup can say why it
// stopped.
func (t *GroupTree) UncacheAs(b blocks.ID, cause EvictCause) error {
	r := &t.res[Device]
	if uint(b)-1 >= uint(len(r.ent))-1 || r.ent[b].node == 0 {
		return &BlockError{Op: "uncache", ID: b, Err: ErrNotCached}
	}
	x := &r.ent[b]
	n, g := x.node, int(x.group)
	nd := &t.nodes[n]
	i := int(n)*t.ng + g
	prev := int32(0)
	for c := r.head[i]; c != int32(b); c = r.ent[c].next {
		prev = c
	}
	// b is the tail exactly when nothing follows it.
	if next := x.next; prev == 0 {
		r.head[i] = next
		if next == 0 {
			r.tail[i] = 0
			if g < goneGroups {
				nd.gone[g] = cause
			}
			r.prefixes[g]--
			if t.ev != nil {
				t.emitRemoved(b, n, g)
			}
		}
	} else {
		r.ent[prev].next = next
		if next == 0 {
			r.tail[i] = prev
		}
	}
	x.node, x.next = 0, 0
	nd.entries--
	r.cached[g]--
	t.maybeFree(n)
	return nil
}
