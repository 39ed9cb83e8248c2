package prefix

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
)

// A GroupTree's events, for maintainers.
//
// With an observer, every node gets an event hash when it is made: the Hasher's chained
// hash of its unit of tokens under its parent's (the Hasher's Root for a namespace's first
// unit, whose Extra carries the namespace's salt; every unit carries its LoRA), so that for
// a group whose block is one match unit the hashes are exactly those an Index of that
// block size would report and a router recomputes. A group whose block is k units reports
// a block by the hash of its last unit's node (which names the whole prefix) with the
// node k units up as its parent. Events describe (prefix, group) presence, not block
// copies: BlockStored when a (node, group) gains its first block, BlockRemoved when it
// loses its last. vLLM reports every copy of a duplicate too, so that a router hearing
// one copy's removal forgets a prefix the server still holds; here it stays held.

// groupEvents is the tree's event state, allocated by SetObserver.
type groupEvents struct {
	obs      Observer
	hasher   Hasher
	hs       int
	k        []int   // match units per block, per group
	rootHash []byte  // the Hasher's Root
	hashes   []byte  // hs per node
	nsRoot   []Node  // per node: its namespace's root
	buf      []byte  // scratch: a run's hashes
	toks     []int32 // scratch: a run's tokens
	ids      []blocks.ID
	stored   BlockStored // reused: an event passed to an interface would escape each time
	removed  BlockRemoved
}

// SetObserver makes the tree report its entries to o, synchronously and in order, each
// event naming its group (BlockStored and BlockRemoved with HasGroup; AllBlocksCleared
// from Clear). h hashes the blocks (nil: Fast64); blockUnits[g] is group g's block size
// in match units, which the events' tokens and parents need. It must be called before the
// tree has any node (else ErrInvalidArgument, changing nothing); o nil turns events off.
func (t *GroupTree) SetObserver(o Observer, h Hasher, blockUnits []int) error {
	if t.live != 0 || len(t.nodes) != 1 {
		return fmt.Errorf("%w: SetObserver on a tree that has nodes", ErrInvalidArgument)
	}
	if o == nil {
		t.ev = nil
		return nil
	}
	if len(blockUnits) != t.ng {
		return fmt.Errorf("%w: %d block sizes for %d groups", ErrInvalidArgument, len(blockUnits), t.ng)
	}
	for _, k := range blockUnits {
		if k <= 0 || k > 1<<20 {
			return fmt.Errorf("%w: a block of %d match units", ErrInvalidArgument, k)
		}
	}
	if h == nil {
		h = Fast64{}
	}
	hs := h.Size()
	if hs <= 0 || hs > 64 {
		return fmt.Errorf("%w: hash size %d", ErrInvalidArgument, hs)
	}
	ev := &groupEvents{obs: o, hasher: h, hs: hs, k: append([]int(nil), blockUnits...)}
	ev.rootHash = make([]byte, hs)
	h.Root(ev.rootHash)
	ev.hashes = make([]byte, hs, cap(t.nodes)*hs)
	ev.nsRoot = make([]Node, 1, cap(t.nodes))
	t.ev = ev
	t.extras = true
	return nil
}

// addNode grows the event arrays with a node slot.
func (ev *groupEvents) addNode() {
	ev.hashes = append(ev.hashes, make([]byte, ev.hs)...)
	ev.nsRoot = append(ev.nsRoot, 0)
}

// hashOf returns node n's event hash.
func (ev *groupEvents) hashOf(n Node) []byte {
	return ev.hashes[int(n)*ev.hs : int(n+1)*ev.hs]
}

// hashNode computes the event hash of node n, just made under parent.
func (t *GroupTree) hashNode(n, parent Node) {
	ev := t.ev
	prev, root := ev.rootHash, parent
	if !t.IsRoot(parent) {
		prev, root = ev.hashOf(parent), ev.nsRoot[parent]
	}
	ev.nsRoot[n] = root
	ns := t.namespaceOf(root)
	x := Extra{LoRA: ns.LoRA}
	if t.IsRoot(parent) {
		x.Salt = ns.Salt
	}
	ev.hasher.Block(ev.hashOf(n), prev, t.tokens(n), x)
}

// namespaceOf returns the namespace of root r.
func (t *GroupTree) namespaceOf(r Node) Namespace {
	if r == RootNode {
		return Namespace{}
	}
	return t.rootNS[r]
}

// ancestor returns the node k units above n.
func (t *GroupTree) ancestor(n Node, k int) Node {
	for range k {
		n = t.nodes[n].parent
	}
	return n
}

// emitChain reports ids[from:to], group g's blocks at path[(i+1)k-1], each the first of
// its (node, group), as one chain in medium ("" for the device; ids are then a lower
// tier's slots).
func (t *GroupTree) emitChain(g int, ids []blocks.ID, path []Node, k, from, to int, medium string) {
	ev := t.ev
	first := path[(from+1)*k-1]
	par := t.ancestor(first, k)
	buf := ev.buf[:0]
	if !t.IsRoot(par) {
		buf = append(buf, ev.hashOf(par)...)
	}
	np := len(buf)
	for i := from; i < to; i++ {
		buf = append(buf, ev.hashOf(path[(i+1)*k-1])...)
	}
	toks := ev.toks[:0]
	for u := from * k; u < to*k; u++ {
		toks = append(toks, t.tokens(path[u])...)
	}
	ev.buf, ev.toks = buf, toks
	e := &ev.stored
	*e = BlockStored{Hashes: buf[np:], HashSize: ev.hs, Blocks: ids[from:to], Tokens: toks, BlockSize: k * t.unit,
		Namespace: t.namespaceOf(ev.nsRoot[first]), Group: g, HasGroup: true, Medium: medium}
	if np > 0 {
		e.Parent = buf[:np]
	}
	ev.obs.BlockStored(e)
	*e = BlockStored{}
}

// emitOne reports block b (a slot of medium's tier, for a lower tier), just cached as the
// first of (n, g) in its tier.
func (t *GroupTree) emitOne(b blocks.ID, n Node, g int, medium string) {
	ev := t.ev
	k := ev.k[g]
	path := ev.pathTo(t, n, k)
	ev.ids = append(ev.ids[:0], b)
	t.emitChain(g, ev.ids, path, k, 0, 1, medium)
}

// pathTo returns the k nodes ending at n, top first, in scratch.
func (ev *groupEvents) pathTo(t *GroupTree, n Node, k int) []Node {
	p := t.evPath[:0]
	for range k {
		p = append(p, n)
		n = t.nodes[n].parent
	}
	for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
		p[i], p[j] = p[j], p[i]
	}
	t.evPath = p
	return p
}

// emitRemoved reports that (n, g) lost its last device block, b. Not inlined: Uncache,
// the eviction path, keeps its registers for the common case of no observer.
//
//go:noinline
func (t *GroupTree) emitRemoved(b blocks.ID, n Node, g int) { t.emitRemovedIn(b, n, g, "") }

// emitRemovedIn reports that (n, g) lost its last block, b, in medium's tier (b is a slot
// of that tier for a lower one).
func (t *GroupTree) emitRemovedIn(b blocks.ID, n Node, g int, medium string) {
	ev := t.ev
	ev.ids = append(ev.ids[:0], b)
	ev.removed = BlockRemoved{Hashes: ev.hashOf(n), HashSize: ev.hs, Blocks: ev.ids, Group: g, HasGroup: true, Medium: medium}
	ev.obs.BlockRemoved(&ev.removed)
	ev.removed = BlockRemoved{}
}

// Clear uncaches every entry of every group in every tier, as vLLM's reset_prefix_cache
// (but its lower tiers too), and reports one AllBlocksCleared. It refuses, changing
// nothing, with ErrBlocksHeld while any node is pinned (a sequence positioned in the tree)
// and with ErrTransfersPending while a transfer is in flight. The caller keeps its
// refcounts and free list: the blocks are merely no longer cached.
func (t *GroupTree) Clear() error {
	if t.PendingTransfers() > 0 {
		return ErrTransfersPending
	}
	held := 0
	for n := range t.Nodes() {
		held += int(t.nodes[n].pins)
	}
	if held > 0 {
		return &HeldError{Held: held}
	}
	ev := t.ev
	t.ev = nil // one AllBlocksCleared, not a removal per entry
	r := &t.res[Device]
	for b := range r.ent {
		if r.ent[b].node != 0 {
			_ = t.UncacheAs(blocks.ID(b), EvictReset)
		}
	}
	if t.tiers != nil {
		t.clearTiers()
	}
	t.ev = ev
	if ev != nil {
		ev.obs.AllBlocksCleared()
	}
	return nil
}

// EventHash appends to dst node n's event hash, the hash its blocks' BlockStored and
// BlockRemoved events carry, and reports whether n has one: false (dst unchanged) when the
// tree has no observer or n is not a live node other than a root. It lets a caller name a
// node as its events do; like Index.Hash, it copies, so the caller may keep or change it.
func (t *GroupTree) EventHash(dst []byte, n Node) ([]byte, bool) {
	if t.ev == nil || !t.IsLive(n) || t.IsRoot(n) {
		return dst, false
	}
	return append(dst, t.ev.hashOf(n)...), true
}
