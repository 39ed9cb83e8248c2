package prefix

import (
	"fmt"
	"iter"
)

// GroupTree is the prefix index of a hybrid model: one tree of logical prefixes shared by
// several KV-cache groups, in which each node holds, per group, the physical blocks
// cached for that prefix. Its nodes are not pool blocks: a node is a prefix of whole
// match units (its tokens verified on every step, a chained 64-bit key only to find its
// slot), and a group whose block is k units long caches its block i at the node of unit
// (i+1)k-1, whose path already names the whole prefix. A node may have entries for some
// groups and not others (a sliding-window block released mid-sequence and evicted leaves
// a tombstone that keeps the later nodes reachable, as SGLang's swa_radix_cache does).
//
// A GroupTree knows no free list and holds no references: the owner (blocktable/hybrid's
// Manager) keeps the refcounts and vLLM's free queue in a blocks.FreeQueue, and calls
// Uncache for a cached block it takes off that queue (an eviction). A node lives while it
// has an entry, a child or a pin (a sequence positioned on it), and is freed, with its
// ancestors that nothing keeps, when the last one goes: leaf-only by construction.
// Namespaces (LoRA adapter, cache salt) are separate roots.
//
// Entries have a residency (Tier): the device's lists, and with SetTiers a host, disk or
// user tier's copies (grouptree_tiers.go); a node stays while any tier holds an entry. Every call is O(units or entries touched) and allocates only
// when the tree grows past its largest size so far. A GroupTree is not safe for
// concurrent use.
type GroupTree struct {
	unit int // tokens per match unit
	ng   int // groups

	nodes     []gnode
	ntok      []int32 // unit tokens per node
	freeNodes []Node
	live      int // nodes in the tree, the zero namespace's root excluded
	slots     []Node
	shift     uint

	// Namespace roots: node 0 is the zero namespace's root; every other namespace has a
	// root node of its own, found through roots, not the child table, and freed like any
	// node once nothing is under it.
	roots  map[Namespace]Node
	rootNS map[Node]Namespace

	// res holds the entries per tier of residency; only the device tier exists yet.
	res [groupTiers]residency

	duplicates uint64
	stats      []int // Stats' copies of the per-group counters: Cached, then Prefixes

	ev     *groupEvents // nil: no observer, and nothing computed for events
	evPath []Node

	tiers *gtierStore // nil: no lower tiers (SetTiers)
	// extras: ev or tiers is set, so a new node grows their arrays (one check in newNode)
	extras bool
}

// Node names one logical prefix of a GroupTree. RootNode is the zero namespace's root;
// NoNode is the answer for a prefix the tree does not have.
type Node int32

const (
	// RootNode is the root of the zero Namespace, which always exists.
	RootNode Node = 0
	// NoNode is returned for a namespace without a root.
	NoNode Node = -1
)

// gnode is one logical prefix.
type gnode struct {
	key      uint64 // unitKey(parent's key, tokens): picks the child-table slot
	parent   Node
	hint     Node // the child to try first: the last one a walk found by probing, else the first made
	children int32
	pins     int32 // sequences positioned here
	entries  int32 // cached entries over all groups and tiers
	root     bool  // a namespace's root (not in the child table; caches nothing)
	// gone holds, for the first goneGroups groups, the EvictCause of the removal that last
	// emptied the group's device list here (meaningful while it is empty): in the node's
	// padding, so that the node stays 32 bytes and freeing it forgets them for free.
	gone [goneGroups]EvictCause
}

// goneGroups is how many groups a node records removal causes for.
const goneGroups = 3

// freeNode marks a node slot that is not in the tree (on freeNodes).
var freeNode = gnode{parent: NoNode}

// isPrefixNode reports whether n is a live node below a root: one that can cache.
func (t *GroupTree) isPrefixNode(n Node) bool {
	return n > 0 && int(n) < len(t.nodes) && t.nodes[n].parent != NoNode && !t.nodes[n].root
}

// IsLive reports whether n is a node of the tree (a root, a prefix or a tombstone), not a
// freed slot.
func (t *GroupTree) IsLive(n Node) bool {
	return n >= 0 && int(n) < len(t.nodes) && t.nodes[n].parent != NoNode
}

// GroupTreeStats are a GroupTree's counters.
type GroupTreeStats struct {
	// Nodes is the number of live nodes, tombstones and namespace roots included.
	Nodes int
	// Cached is the number of device entries per group.
	Cached []int
	// Prefixes is the number of (node, group) pairs with a device entry, per group:
	// Cached less the duplicates, and what the events report as held.
	Prefixes []int
	// Duplicates counts blocks cached under a (node, group) that already had one.
	Duplicates uint64
}

// MaxGroups is the most KV-cache groups a GroupTree holds (a group is stored in a byte).
const MaxGroups = 255

// NewGroupTree returns an empty tree for a pool of numBlocks device blocks (IDs 1 to
// numBlocks-1; block 0 is the null block), matching in units of unit tokens, over groups
// KV-cache groups. The error wraps ErrInvalidArgument for a size out of range.
func NewGroupTree(numBlocks, unit, groups int) (*GroupTree, error) {
	if numBlocks < 2 || numBlocks > 1<<30 || unit <= 0 || unit > 1<<20 || groups <= 0 || groups > MaxGroups {
		return nil, fmt.Errorf("%w: group tree of %d blocks, unit %d, %d groups", ErrInvalidArgument, numBlocks, unit, groups)
	}
	t := &GroupTree{unit: unit, ng: groups, stats: make([]int, 2*groups)}
	// Node 0 is the root; room for about one node per two blocks before the first growth.
	c := numBlocks/2 + 1
	t.nodes = make([]gnode, 1, c)
	t.ntok = make([]int32, unit, c*unit)
	t.res[Device].init(numBlocks, groups, c)
	size := 16
	for size < numBlocks*2 {
		size *= 2
	}
	t.setTable(size)
	t.roots, t.rootNS = map[Namespace]Node{}, map[Node]Namespace{}
	return t, nil
}

// Unit is the tokens per match unit.
func (t *GroupTree) Unit() int { return t.unit }

// Groups is the number of KV-cache groups.
func (t *GroupTree) Groups() int { return t.ng }

// Stats returns the counters. It allocates nothing: Cached and Prefixes are the tree's
// own copies of its per-group counters, made at this call and overwritten by the next
// Stats call, so copy them to keep them past it (blocktable/hybrid's Manager.Stats
// does). Changing them touches none of the tree's counters. CachedIn, PrefixesIn,
// LiveNodes and DuplicateCount read the same counters one at a time.
func (t *GroupTree) Stats() GroupTreeStats {
	r := &t.res[Device]
	c, p := t.stats[:t.ng:t.ng], t.stats[t.ng:]
	copy(c, r.cached)
	copy(p, r.prefixes)
	return GroupTreeStats{Nodes: t.live, Cached: c, Prefixes: p, Duplicates: t.duplicates}
}

// Parent returns n's parent (RootNode for a namespace root and for the zero namespace's
// first units), or NoNode for a node that is not live (freed, or out of range).
func (t *GroupTree) Parent(n Node) Node {
	if uint(n) >= uint(len(t.nodes)) {
		return NoNode
	}
	return t.nodes[n].parent
}

// IsRoot reports whether n is a namespace's root (RootNode included); false for a node
// out of range.
func (t *GroupTree) IsRoot(n Node) bool {
	return n == RootNode || uint(n) < uint(len(t.nodes)) && t.nodes[n].root
}

// Nodes yields every live node but RootNode, in slot order: for invariant checks and
// dumps (it is O(node slots)).
func (t *GroupTree) Nodes() iter.Seq[Node] {
	return func(yield func(Node) bool) {
		for n := 1; n < len(t.nodes); n++ {
			if t.nodes[n].parent != NoNode && !yield(Node(n)) {
				return
			}
		}
	}
}

// Pins returns how many sequences are positioned on n (0 for a node out of range).
func (t *GroupTree) Pins(n Node) int {
	if uint(n) >= uint(len(t.nodes)) {
		return 0
	}
	return int(t.nodes[n].pins)
}

// Pin positions a sequence on n, which then stays (with its ancestors) until Unpin.
// RootNode needs no pin (a no-op). It fails with ErrInvalidArgument, changing nothing,
// for a node that is not live.
func (t *GroupTree) Pin(n Node) error {
	if uint(n)-1 < uint(len(t.nodes))-1 && t.nodes[n].parent != NoNode {
		t.nodes[n].pins++
		return nil
	}
	if n == RootNode {
		return nil
	}
	return errPinNotLive // a sentinel, so that Pin stays inlined
}

var errPinNotLive = fmt.Errorf("%w: pin a node that is not live", ErrInvalidArgument)

// Unpin undoes one Pin of n, freeing n and the ancestors nothing else keeps (a no-op for
// RootNode). It fails, changing nothing, with ErrInvalidArgument for a node that is not
// live and ErrNotPinned for one no sequence is positioned on: a count never goes negative.
func (t *GroupTree) Unpin(n Node) error {
	if uint(n)-1 < uint(len(t.nodes))-1 && t.nodes[n].pins > 0 { // a freed node has none
		t.nodes[n].pins--
		t.maybeFree(n)
		return nil
	}
	return t.pinError(n)
}

// pinError is Unpin's refusal of n: nil for RootNode (which needs no pin), else
// ErrInvalidArgument for a node that is not live and ErrNotPinned for a live node with
// no pin.
func (t *GroupTree) pinError(n Node) error {
	switch {
	case n == RootNode:
		return nil
	case !t.IsLive(n):
		return fmt.Errorf("%w: unpin node %d, which is not live", ErrInvalidArgument, n)
	}
	return fmt.Errorf("%w: unpin node %d", ErrNotPinned, n)
}

// Root returns ns's root node, creating it if create is set: RootNode for the zero
// namespace, NoNode when ns has none and create is not set, or inside a BatchTierEvents
// batch (no node is made there).
func (t *GroupTree) Root(ns Namespace, create bool) Node {
	if ns == (Namespace{}) {
		return RootNode
	}
	if n, ok := t.roots[ns]; ok {
		return n
	}
	if !create || t.inBatch() {
		return NoNode
	}
	n := t.newNode()
	t.nodes[n] = gnode{key: unitKey(fnvString(ns.LoRA), []int32{int32(len(ns.Salt))}) ^ fnvString(ns.Salt), root: true}
	t.nodes[0].children++
	t.live++
	t.roots[ns], t.rootNS[n] = n, ns
	return n
}

// fnvString is FNV-1a: namespace roots' keys only seed their children's keys.
func fnvString(v string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= 0x100000001b3
	}
	return h
}

// newNode takes a free node slot or appends one.
func (t *GroupTree) newNode() Node {
	if k := len(t.freeNodes); k > 0 {
		n := t.freeNodes[k-1]
		t.freeNodes = t.freeNodes[:k-1]
		return n
	}
	n := Node(len(t.nodes))
	t.nodes = append(t.nodes, gnode{})
	t.ntok = append(t.ntok, make([]int32, t.unit)...)
	for i := range t.res {
		t.res[i].addNode(t.ng)
	}
	if t.extras {
		t.growExtras()
	}
	return n
}

// growExtras grows the event and lower-tier arrays with a node slot.
func (t *GroupTree) growExtras() {
	if t.ev != nil {
		t.ev.addNode()
	}
	if t.tiers != nil {
		t.tiers.addNode(t.ng)
	}
}

// maybeFree frees node n, and then its parent and so on, while nothing keeps them.
func (t *GroupTree) maybeFree(n Node) {
	for n != 0 {
		nd := &t.nodes[n]
		if nd.entries != 0 || nd.children != 0 || nd.pins != 0 {
			return
		}
		p := nd.parent
		if nd.root {
			ns := t.rootNS[n]
			delete(t.roots, ns)
			delete(t.rootNS, n)
		} else {
			t.removeSlot(n)
		}
		*nd = freeNode // its gone causes with it
		if t.nodes[p].hint == n {
			t.nodes[p].hint = 0
		}
		t.freeNodes = append(t.freeNodes, n)
		t.live--
		t.nodes[p].children--
		n = p
	}
}
