package hybrid

import (
	"unsafe"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
)

// The index and the pool live together here because vLLM's order of evictions comes from
// their interplay: one free queue holds every unreferenced block, cached or not, in the
// order it was freed, allocation pops its front and evicts the block if it is cached, and a
// hit takes cached blocks out of the queue from anywhere.
//
// The prefix index is a trie of logical nodes, one per distinct prefix of whole match
// units (tokens verified, a chained 64-bit key only to find the slot), shared by all
// groups. A node holds, per group, the list of physical blocks cached for that prefix in
// the order they were cached (vLLM caches a second block under a key that already has one;
// lookups take the first). A group whose block is k match units long caches its block i at
// the node of unit (i+1)k-1, whose chained key already names the whole prefix.
//
// Sliding-window and Mamba blocks are released while the sequence still holds later ones,
// so their entries are evicted from the middle of a chain. The node then stays as a
// tombstone (no entries, but children or a sequence's pin) that keeps the later nodes
// reachable, as SGLang's swa_radix_cache does; a node is freed when it has no entries, no
// children and no pin. Full-attention entries are evicted in queue order too, and with
// every sequence releasing last block first that order is leaf-first: a node's
// full-attention entries are never all gone while a child has one (CheckInvariants).

// blk is one physical block.
type blk struct {
	ref   int32
	prev  int32 // free-queue links (-1 at the ends)
	next  int32
	node  int32 // node the block is cached under; 0 when not cached
	lnext int32 // next block cached under the same (node, group); 0 at the end
	group uint8
	inq   bool
}

// node is one logical prefix.
type node struct {
	key      uint64 // unitKey(parent's key, tokens): picks the child-table slot
	parent   int32
	hint     int32 // the child to try first: the last one a walk found by probing, else the first made
	children int32
	pins     int32 // sequences positioned here
	entries  int32 // cached blocks over all groups
}

const noBlock = -1

type store struct {
	unit int // tokens per match unit
	ng   int

	blks       []blk
	qhead      int32
	qtail      int32
	qlen       int
	unhashedUp bool // free uncached blocks to the front (vLLM's newer order)

	nodes     []node
	ntok      []int32 // unit tokens per node
	head      []int32 // ng per node: first cached block, 0 = none
	tail      []int32
	freeNodes []int32
	live      int // nodes in the trie, root excluded
	slots     []int32
	shift     uint

	// Namespace roots: node 0 is the zero namespace's root; every other namespace (LoRA
	// adapter, cache salt) has a root node of its own, found through roots, not the child
	// table, and freed like any node once nothing is under it.
	roots  map[prefix.Namespace]int32
	rootNS map[int32]prefix.Namespace

	evictions  uint64
	duplicates uint64
	dropped    uint64
	cached     []int // cached entries per group
}

func newStore(numBlocks, unit, ng int, unhashedFirst bool) *store {
	s := &store{unit: unit, ng: ng, qhead: noBlock, qtail: noBlock, unhashedUp: unhashedFirst}
	s.blks = make([]blk, numBlocks)
	for i := 1; i < numBlocks; i++ {
		s.blks[i].prev, s.blks[i].next = noBlock, noBlock
		s.pushBack(int32(i))
	}
	s.blks[blocks.NullID].prev, s.blks[blocks.NullID].next = noBlock, noBlock
	// Node 0 is the root; room for about one node per block before the first growth.
	s.nodes = make([]node, 1, numBlocks/2+1)
	s.ntok = make([]int32, unit, (numBlocks/2+1)*unit)
	s.head = make([]int32, ng, (numBlocks/2+1)*ng)
	s.tail = make([]int32, ng, (numBlocks/2+1)*ng)
	size := 16
	for size < numBlocks*2 {
		size *= 2
	}
	s.setTable(size)
	s.cached = make([]int, ng)
	s.roots, s.rootNS = map[prefix.Namespace]int32{}, map[int32]prefix.Namespace{}
	return s
}

// root returns ns's root node, creating it if create is set; 0 for the zero namespace,
// and -1 when ns has none and create is not set.
func (s *store) root(ns prefix.Namespace, create bool) int32 {
	if ns == (prefix.Namespace{}) {
		return 0
	}
	if n, ok := s.roots[ns]; ok {
		return n
	}
	if !create {
		return -1
	}
	n := s.newNode()
	s.nodes[n] = node{key: unitKey(hashString(ns.LoRA), []int32{int32(len(ns.Salt))}) ^ hashString(ns.Salt)}
	s.nodes[0].children++
	s.live++
	s.roots[ns], s.rootNS[n] = n, ns
	return n
}

// hashString is FNV-1a: namespace roots' keys only seed their children's keys.
func hashString(v string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= 0x100000001b3
	}
	return h
}

// newNode takes a free node slot or appends one.
func (s *store) newNode() int32 {
	if k := len(s.freeNodes); k > 0 {
		n := s.freeNodes[k-1]
		s.freeNodes = s.freeNodes[:k-1]
		return n
	}
	n := int32(len(s.nodes))
	s.nodes = append(s.nodes, node{})
	s.ntok = append(s.ntok, make([]int32, s.unit)...)
	for range s.ng {
		s.head = append(s.head, 0)
		s.tail = append(s.tail, 0)
	}
	return n
}

// Free queue.

func (s *store) pushBack(b int32) {
	x := &s.blks[b]
	x.prev, x.next, x.inq = s.qtail, noBlock, true
	if s.qtail != noBlock {
		s.blks[s.qtail].next = b
	} else {
		s.qhead = b
	}
	s.qtail = b
	s.qlen++
}

func (s *store) pushFront(b int32) {
	x := &s.blks[b]
	x.prev, x.next, x.inq = noBlock, s.qhead, true
	if s.qhead != noBlock {
		s.blks[s.qhead].prev = b
	} else {
		s.qtail = b
	}
	s.qhead = b
	s.qlen++
}

func (s *store) unlink(b int32) {
	x := &s.blks[b]
	if x.prev != noBlock {
		s.blks[x.prev].next = x.next
	} else {
		s.qhead = x.next
	}
	if x.next != noBlock {
		s.blks[x.next].prev = x.prev
	} else {
		s.qtail = x.prev
	}
	x.prev, x.next, x.inq = noBlock, noBlock, false
	s.qlen--
}

// alloc pops the queue's front, evicting it if it is cached. The caller has checked qlen.
func (s *store) alloc() blocks.ID {
	b := s.qhead
	s.unlink(b)
	if s.blks[b].node != 0 {
		s.uncache(b)
		s.evictions++
	}
	s.blks[b].ref = 1
	return blocks.ID(b)
}

// take adds a reference to a hit block, taking it out of the queue if it was there.
func (s *store) take(b blocks.ID) {
	x := &s.blks[b]
	if x.ref == 0 {
		s.unlink(int32(b))
	}
	x.ref++
}

// release drops a reference; an unreferenced block joins the queue's end (or its front,
// for an uncached block under the newer order).
func (s *store) release(b blocks.ID) {
	x := &s.blks[b]
	x.ref--
	if x.ref > 0 {
		return
	}
	if s.unhashedUp && x.node == 0 {
		s.pushFront(int32(b))
	} else {
		s.pushBack(int32(b))
	}
}

// Entries.

// first returns the first block cached for group g at node n, or 0.
func (s *store) first(n int32, g int) int32 { return s.head[int(n)*s.ng+g] }

// cache records b as cached for group g at node n, behind any block already there.
func (s *store) cache(b blocks.ID, n int32, g int) {
	x := &s.blks[b]
	x.node, x.group, x.lnext = n, uint8(g), 0
	i := int(n)*s.ng + g
	if t := s.tail[i]; t != 0 {
		s.blks[t].lnext = int32(b)
		s.duplicates++
	} else {
		s.head[i] = int32(b)
	}
	s.tail[i] = int32(b)
	s.nodes[n].entries++
	s.cached[g]++
}

// uncache removes b's entry, and frees its node if nothing keeps the node any more.
func (s *store) uncache(b int32) {
	x := &s.blks[b]
	n, g := x.node, int(x.group)
	i := int(n)*s.ng + g
	prev := int32(0)
	for c := s.head[i]; c != b; c = s.blks[c].lnext {
		prev = c
	}
	if prev == 0 {
		s.head[i] = x.lnext
	} else {
		s.blks[prev].lnext = x.lnext
	}
	if s.tail[i] == b {
		s.tail[i] = prev
	}
	x.node, x.lnext = 0, 0
	s.nodes[n].entries--
	s.cached[g]--
	s.maybeFree(n)
}

// Trie.

func (s *store) setTable(size int) {
	s.slots = make([]int32, size)
	s.shift = 64
	for 1<<(64-s.shift) < size {
		s.shift--
	}
}

func (s *store) slot(key uint64) int { return int((key * 0x9E3779B97F4A7C15) >> s.shift) }

// child finds the node for the unit of tokens toks (with chained key) under parent, or 0.
func (s *store) child(parent int32, key uint64, toks []int32) int32 {
	mask := len(s.slots) - 1
	for i := s.slot(key); ; i = (i + 1) & mask {
		n := s.slots[i]
		if n == 0 {
			return 0
		}
		if nd := &s.nodes[n]; nd.key == key && nd.parent == parent && sameTokens(s.ntok[int(n)*s.unit:int(n+1)*s.unit], toks) {
			return n
		}
	}
}

// sameTokens compares two units of tokens as bytes, which the runtime's memequal does
// with vector loads: much cheaper than a loop over int32s for 16-token units.
func sameTokens(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 {
		return true
	}
	return unsafe.String((*byte)(unsafe.Pointer(&a[0])), 4*len(a)) ==
		unsafe.String((*byte)(unsafe.Pointer(&b[0])), 4*len(b))
}

// next finds the node for the unit toks under parent, or 0: the parent's hint child if
// its tokens are toks (no hash, no probe: along a shared prefix it almost always is),
// else by the child table, and the child found becomes the hint.
func (s *store) next(parent int32, toks []int32) int32 {
	if h := s.nodes[parent].hint; h != 0 && sameTokens(s.ntok[int(h)*s.unit:int(h+1)*s.unit], toks) {
		return h
	}
	n := s.child(parent, unitKey(s.nodes[parent].key, toks), toks)
	if n != 0 {
		s.nodes[parent].hint = n
	}
	return n
}

// ensure returns the node for toks under parent, creating it if needed.
func (s *store) ensure(parent int32, toks []int32) int32 {
	if h := s.nodes[parent].hint; h != 0 && sameTokens(s.ntok[int(h)*s.unit:int(h+1)*s.unit], toks) {
		return h
	}
	key := unitKey(s.nodes[parent].key, toks)
	if n := s.child(parent, key, toks); n != 0 {
		return n
	}
	n := s.newNode()
	s.nodes[n] = node{key: key, parent: parent}
	copy(s.ntok[int(n)*s.unit:], toks)
	s.nodes[parent].children++
	if s.nodes[parent].hint == 0 {
		s.nodes[parent].hint = n
	}
	s.live++
	if s.live*2 > len(s.slots) {
		s.grow()
	}
	s.insertSlot(n)
	return n
}

func (s *store) insertSlot(n int32) {
	mask := len(s.slots) - 1
	i := s.slot(s.nodes[n].key)
	for s.slots[i] != 0 {
		i = (i + 1) & mask
	}
	s.slots[i] = n
}

func (s *store) grow() {
	old := s.slots
	s.setTable(len(old) * 2)
	for _, n := range old {
		if n != 0 {
			s.insertSlot(n)
		}
	}
}

// removeSlot deletes n from the table with backward-shift deletion (linear probing).
func (s *store) removeSlot(n int32) {
	mask := len(s.slots) - 1
	i := s.slot(s.nodes[n].key)
	for s.slots[i] != n {
		i = (i + 1) & mask
	}
	for {
		s.slots[i] = 0
		j := i
		for {
			j = (j + 1) & mask
			m := s.slots[j]
			if m == 0 {
				return
			}
			h := s.slot(s.nodes[m].key)
			// m may move to i if its home h is not cyclically within (i, j].
			if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
				s.slots[i] = m
				i = j
				break
			}
		}
	}
}

// maybeFree frees node n, and then its parent and so on, while nothing keeps them.
func (s *store) maybeFree(n int32) {
	for n != 0 {
		nd := &s.nodes[n]
		if nd.entries != 0 || nd.children != 0 || nd.pins != 0 {
			return
		}
		p := nd.parent
		if ns, isRoot := s.rootNS[n]; isRoot {
			delete(s.roots, ns)
			delete(s.rootNS, n)
		} else {
			s.removeSlot(n)
		}
		*nd = node{}
		if s.nodes[p].hint == n {
			s.nodes[p].hint = 0
		}
		s.freeNodes = append(s.freeNodes, n)
		s.live--
		s.nodes[p].children--
		n = p
	}
}

func (s *store) pin(n int32) {
	if n != 0 {
		s.nodes[n].pins++
	}
}

func (s *store) unpin(n int32) {
	if n != 0 {
		s.nodes[n].pins--
		s.maybeFree(n)
	}
}

// unitKey chains a unit of tokens onto its parent's key. It only picks table slots:
// equality is always decided on the tokens and the parent. The tokens are folded in
// pairs, NH-style ((t[i]+k[i]) * (t[i+1]+k[i+1]) summed), so the multiplies are
// independent of one another rather than one dependent chain, then mixed once.
func unitKey(parent uint64, toks []int32) uint64 {
	var sum uint64
	i := 0
	if len(toks) == 16 { // the usual unit, unrolled
		t := (*[16]int32)(toks)
		sum = (uint64(uint32(t[0]))+0x243F6A88)*(uint64(uint32(t[1]))+0x85A308D3) +
			(uint64(uint32(t[2]))+0x13198A2E)*(uint64(uint32(t[3]))+0x03707344) +
			(uint64(uint32(t[4]))+0xA4093822)*(uint64(uint32(t[5]))+0x299F31D0) +
			(uint64(uint32(t[6]))+0x082EFA98)*(uint64(uint32(t[7]))+0xEC4E6C89) +
			(uint64(uint32(t[8]))+0x452821E6)*(uint64(uint32(t[9]))+0x38D01377) +
			(uint64(uint32(t[10]))+0xBE5466CF)*(uint64(uint32(t[11]))+0x34E90C6C) +
			(uint64(uint32(t[12]))+0xC0AC29B7)*(uint64(uint32(t[13]))+0xC97C50DD) +
			(uint64(uint32(t[14]))+0x3F84D5B5)*(uint64(uint32(t[15]))+0xB5470917)
		i = 16
	}
	for ; i+1 < len(toks); i += 2 {
		k := nhKeys[(i/2)&(len(nhKeys)-1)]
		sum += (uint64(uint32(toks[i])) + k[0]) * (uint64(uint32(toks[i+1])) + k[1])
	}
	if i < len(toks) {
		sum += (uint64(uint32(toks[i])) + 0x9E3779B9) * 0xC2B2AE3D27D4EB4F
	}
	h := sum ^ (parent * 0x9E3779B97F4A7C15) ^ uint64(len(toks))
	h ^= h >> 33
	h *= 0xFF51AFD7ED558CCD
	h ^= h >> 33
	h *= 0xC4CEB9FE1A85EC53
	return h ^ h>>33
}

// nhKeys are fixed odd 32-bit constants for unitKey's pairs (the fractional digits of
// pi), repeated for units longer than 32 tokens.
var nhKeys = [16][2]uint64{
	{0x243F6A88, 0x85A308D3}, {0x13198A2E, 0x03707344}, {0xA4093822, 0x299F31D0}, {0x082EFA98, 0xEC4E6C89},
	{0x452821E6, 0x38D01377}, {0xBE5466CF, 0x34E90C6C}, {0xC0AC29B7, 0xC97C50DD}, {0x3F84D5B5, 0xB5470917},
	{0x9216D5D9, 0x8979FB1B}, {0xD1310BA6, 0x98DFB5AC}, {0x2FFD72DB, 0xD01ADFB7}, {0xB8E1AFED, 0x6A267E96},
	{0xBA7C9045, 0xF12C7F99}, {0x24A19947, 0xB3916CF7}, {0x0801F2E2, 0x858EFC16}, {0x636920D8, 0x71574E69},
}
