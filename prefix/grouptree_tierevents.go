package prefix

import (
	"cmp"
	"slices"

	"github.com/kvpage/kvpage/blocks"
)

// A GroupTree's lower-tier events, for maintainers: batched as an Index's (tierplan.go).
// Within CompleteTransfer, and between the owner's BatchTierEvents and FlushTierEvents
// (its stores prepared together, whose slots made room in tier 1), the events are
// collected and emitted when the batch ends: each chain of one group's blocks (each block's
// node k units below the previous one's) that entered one tier is one BlockStored, and
// the blocks of one group that left one tier one BlockRemoved. Stored events go first, so
// that a block moving down a tier is never reported held by none; a block is still
// reported once per tier it enters and once per tier it leaves. Outside a batch each is
// emitted at once. Each collected event copies its hashes and tokens when it is
// collected: a node a batch drops may be freed before the events go. No node is made
// within a batch, so nodes compare by ID there.
type gtierEvents struct {
	depth   int // batches open: events are emitted when the outermost ends
	stored  []gtierEv
	removed []gtierEv
	shash   []byte  // per stored event, its hash (hs bytes)
	phash   []byte  // per stored event, its parent's hash (hs bytes, unset for a first block)
	stoks   []int32 // the stored events' tokens, in order (gtierEv.tok is where each starts)
	rhash   []byte  // per removed event, its hash
	ids     []blocks.ID
	// flushTierStored's scratch: the stored events by (tier, group, parent) and by (tier,
	// group, node), which are emitted, and a chain's hashes and tokens.
	byPar, byNode []int32
	used          []bool
	hashes        []byte
	toks          []int32
}

// gtierEv is one collected lower-tier event: group g's block at node n (par the node k
// units up, the block's parent), in slot s of tier t.
type gtierEv struct {
	t      Tier
	g      int
	s      int32
	n, par Node
	root   Node // n's namespace root
	tok    int  // where its tokens start in stoks
}

// batching reports whether lower-tier events are being collected.
func (t *GroupTree) batching() bool { return t.ev != nil && t.tiers.ev.depth > 0 }

// inBatch reports whether a BatchTierEvents batch is open, in which no node may be made.
func (t *GroupTree) inBatch() bool { return t.tiers != nil && t.tiers.ev.depth > 0 }

// BatchTierEvents starts collecting the lower-tier events (with an observer and lower
// tiers) until the matching FlushTierEvents, which emits them batched: the owner calls it
// around stores it prepares together (PrepareStore), whose slots made room in a tier are
// then one BlockRemoved. CompleteTransfer batches its own. Batches nest.
//
// No node may be made inside a batch (the collected events name nodes by ID, and a node
// freed and made again would be another block under the same ID): between
// BatchTierEvents and its FlushTierEvents, Ensure and Root refuse to make a node and
// return NoNode, changing nothing. Commit, then batch the stores.
func (t *GroupTree) BatchTierEvents() {
	if t.tiers != nil {
		t.tiers.ev.depth++
	}
}

// FlushTierEvents ends a batch BatchTierEvents started, emitting its events when the
// outermost ends: each chain of one group's blocks that entered one tier as one
// BlockStored, then the blocks of one group that left one tier as one BlockRemoved.
func (t *GroupTree) FlushTierEvents() {
	ts := t.tiers
	if ts == nil || ts.ev.depth == 0 {
		return
	}
	if ts.ev.depth--; ts.ev.depth == 0 && t.ev != nil {
		t.flushTierEvents()
	}
}

// collectStored collects group g's block at node n newly resident in slot s of lower tier
// tier (batching).
func (t *GroupTree) collectStored(tier Tier, s int32, n Node, g int) {
	ev, b := t.ev, &t.tiers.ev
	k := ev.k[g]
	path := ev.pathTo(t, n, k)
	par := t.nodes[path[0]].parent
	b.stored = append(b.stored, gtierEv{t: tier, g: g, s: s, n: n, par: par, root: ev.nsRoot[n], tok: len(b.stoks)})
	b.shash = append(b.shash, ev.hashOf(n)...)
	if t.IsRoot(par) {
		b.phash = append(b.phash, ev.rootHash...) // unread: a first block has no parent
	} else {
		b.phash = append(b.phash, ev.hashOf(par)...)
	}
	for _, u := range path {
		b.stoks = append(b.stoks, t.tokens(u)...)
	}
}

// collectRemoved collects group g's block at node n leaving slot s of lower tier tier
// (batching).
func (t *GroupTree) collectRemoved(tier Tier, s int32, n Node, g int) {
	b := &t.tiers.ev
	b.removed = append(b.removed, gtierEv{t: tier, g: g, s: s, n: n})
	b.rhash = append(b.rhash, t.ev.hashOf(n)...)
}

// flushTierEvents emits the collected events: the stored chains, then the removals, one
// event per tier and group.
func (t *GroupTree) flushTierEvents() {
	ev, b := t.ev, &t.tiers.ev
	hs := ev.hs
	t.flushTierStored()
	rm := b.removed
	idx := b.byPar[:0]
	for i := range int32(len(rm)) {
		idx = append(idx, i)
	}
	slices.SortFunc(idx, func(x, y int32) int {
		return cmp.Or(cmp.Compare(rm[x].t, rm[y].t), cmp.Compare(rm[x].g, rm[y].g), cmp.Compare(x, y))
	})
	for i := 0; i < len(idx); {
		first := &rm[idx[i]]
		j := i + 1
		for j < len(idx) && rm[idx[j]].t == first.t && rm[idx[j]].g == first.g {
			j++
		}
		ids, hashes := b.ids[:0], b.hashes[:0]
		for _, x := range idx[i:j] {
			ids = append(ids, blocks.ID(rm[x].s))
			hashes = append(hashes, b.rhash[int(x)*hs:int(x+1)*hs]...)
		}
		b.ids, b.hashes = ids, hashes
		ev.removed = BlockRemoved{Hashes: hashes, HashSize: hs, Blocks: ids, Group: first.g, HasGroup: true,
			Medium: t.tiers.lv[first.t-1].spec.Medium}
		ev.obs.BlockRemoved(&ev.removed)
		ev.removed = BlockRemoved{}
		i = j
	}
	b.byPar = idx
	b.stored, b.removed = b.stored[:0], b.removed[:0]
	b.shash, b.phash, b.stoks, b.rhash = b.shash[:0], b.phash[:0], b.stoks[:0], b.rhash[:0]
}

// tierStored reports group g's block at node n newly resident in slot s of lower tier
// tier: collected in a batch, else at once.
func (t *GroupTree) tierStored(tier Tier, s int32, n Node, g int) {
	if t.batching() {
		t.collectStored(tier, s, n, g)
		return
	}
	t.emitOne(blocks.ID(s), n, g, t.tiers.lv[tier-1].spec.Medium)
}

// tierRemoved reports group g's block at node n leaving slot s of lower tier tier:
// collected in a batch, else at once.
func (t *GroupTree) tierRemoved(tier Tier, s int32, n Node, g int) {
	if t.batching() {
		t.collectRemoved(tier, s, n, g)
		return
	}
	t.emitRemovedIn(blocks.ID(s), n, g, t.tiers.lv[tier-1].spec.Medium)
}

// flushTierStored emits the collected stored events, one per chain of one group's blocks
// that entered one tier, each when its earliest-collected block comes up. The events
// need not be collected in chain order (a plan's copies are ordered by source block, which
// a hybrid model's groups interleave): a chain is followed by its links, found by binary
// search in the events sorted by parent and by node, in O(n log n).
func (t *GroupTree) flushTierStored() {
	b := &t.tiers.ev
	n := len(b.stored)
	if n == 0 {
		return
	}
	st := b.stored
	key := func(i int32) (Tier, int) { return st[i].t, st[i].g }
	byPar, byNode := b.byPar[:0], b.byNode[:0]
	for i := range int32(n) {
		byPar, byNode = append(byPar, i), append(byNode, i)
	}
	slices.SortFunc(byPar, func(x, y int32) int {
		return cmp.Or(cmp.Compare(st[x].t, st[y].t), cmp.Compare(st[x].g, st[y].g), cmp.Compare(st[x].par, st[y].par), cmp.Compare(x, y))
	})
	slices.SortFunc(byNode, func(x, y int32) int {
		return cmp.Or(cmp.Compare(st[x].t, st[y].t), cmp.Compare(st[x].g, st[y].g), cmp.Compare(st[x].n, st[y].n), cmp.Compare(x, y))
	})
	used := slices.Grow(b.used[:0], n)[:n]
	clear(used)
	// find returns an unused event of tier tr and group g whose parent (byParent) or node
	// is nd, or -1.
	find := func(in []int32, byParent bool, tr Tier, g int, nd Node) int32 {
		at := func(i int32) Node {
			if byParent {
				return st[i].par
			}
			return st[i].n
		}
		k, _ := slices.BinarySearchFunc(in, 0, func(x int32, _ int) int {
			return cmp.Or(cmp.Compare(st[x].t, tr), cmp.Compare(st[x].g, g), cmp.Compare(at(x), nd))
		})
		for ; k < len(in); k++ {
			x := in[k]
			if st[x].t != tr || st[x].g != g || at(x) != nd {
				return -1
			}
			if !used[x] {
				return x
			}
		}
		return -1
	}
	// i stays until a chain takes it: the chain found from i's head follows the first
	// unused child at each branch, which may lead past i (a prefix stored with two
	// continuations), and i then heads a chain of its own.
	for i := int32(0); i < int32(n); {
		if used[i] {
			i++
			continue
		}
		head := i
		tr, g := key(i)
		for p := find(byNode, false, tr, g, st[head].par); p >= 0 && p != i; p = find(byNode, false, tr, g, st[head].par) {
			head = p
		}
		ids, hashes, toks := b.ids[:0], b.hashes[:0], b.toks[:0]
		for cur := head; cur >= 0; cur = find(byPar, true, tr, g, st[cur].n) {
			used[cur] = true
			e := &st[cur]
			end := len(b.stoks)
			if int(cur)+1 < n {
				end = st[cur+1].tok
			}
			ids = append(ids, blocks.ID(e.s))
			hashes = append(hashes, b.shash[int(cur)*t.ev.hs:int(cur+1)*t.ev.hs]...)
			toks = append(toks, b.stoks[e.tok:end]...)
		}
		b.ids, b.hashes, b.toks = ids, hashes, toks
		t.emitStoredChain(head, ids, hashes, toks)
	}
	b.byPar, b.byNode, b.used = byPar, byNode, used
}

// emitStoredChain reports the chain of collected stored events starting at head.
func (t *GroupTree) emitStoredChain(head int32, ids []blocks.ID, hashes []byte, toks []int32) {
	ev, b := t.ev, &t.tiers.ev
	first := &b.stored[head]
	hs := ev.hs
	e := &ev.stored
	*e = BlockStored{Hashes: hashes, HashSize: hs, Blocks: ids, Tokens: toks,
		BlockSize: ev.k[first.g] * t.unit, Namespace: t.namespaceOf(first.root), Group: first.g, HasGroup: true,
		Medium: t.tiers.lv[first.t-1].spec.Medium}
	if !t.IsRoot(first.par) {
		e.Parent = b.phash[int(head)*hs : int(head+1)*hs]
	}
	ev.obs.BlockStored(e)
	*e = BlockStored{}
}
