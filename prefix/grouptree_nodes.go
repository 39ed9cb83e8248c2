package prefix

import "unsafe"

// The GroupTree's nodes sit in one open-addressing child table keyed by (parent's key,
// unit tokens), linear probing, backward-shift deletion; equality is always decided on the
// parent and the tokens, never on the key. Each node remembers a hint child (the last one
// a walk found by probing, else its first) so that a walk along a shared prefix compares
// tokens and neither hashes nor probes.

func (t *GroupTree) setTable(size int) {
	t.slots = make([]Node, size)
	t.shift = 64
	for 1<<(64-t.shift) < size {
		t.shift--
	}
}

func (t *GroupTree) slot(key uint64) int { return int((key * 0x9E3779B97F4A7C15) >> t.shift) }

// tokens returns node n's unit of tokens.
func (t *GroupTree) tokens(n Node) []int32 { return t.ntok[int(n)*t.unit : int(n+1)*t.unit] }

// child finds the node for the unit of tokens toks (with chained key) under parent, or 0.
func (t *GroupTree) child(parent Node, key uint64, toks []int32) Node {
	mask := len(t.slots) - 1
	for i := t.slot(key); ; i = (i + 1) & mask {
		n := t.slots[i]
		if n == 0 {
			return 0
		}
		if nd := &t.nodes[n]; nd.key == key && nd.parent == parent && sameUnit(t.tokens(n), toks) {
			return n
		}
	}
}

// sameUnit compares two units of tokens as bytes, which the runtime's memequal does with
// vector loads: much cheaper than a loop over int32s for 16-token units.
func sameUnit(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 {
		return true
	}
	return unsafe.String((*byte)(unsafe.Pointer(&a[0])), 4*len(a)) ==
		unsafe.String((*byte)(unsafe.Pointer(&b[0])), 4*len(b))
}

// Next returns the child of parent for the unit of tokens toks (exactly Unit tokens), or
// 0 when the tree has none (and for toks of another length). It changes nothing a caller
// can observe: the child found by probing becomes parent's hint, so that the next walk
// along it compares tokens only.
func (t *GroupTree) Next(parent Node, toks []int32) Node {
	if len(toks) != t.unit {
		return 0
	}
	if h := t.nodes[parent].hint; h != 0 && sameUnit(t.tokens(h), toks) {
		return h
	}
	n := t.child(parent, unitKey(t.nodes[parent].key, toks), toks)
	if n != 0 {
		t.nodes[parent].hint = n
	}
	return n
}

// Ensure returns the child of parent for the unit toks, creating it if needed. A new node
// has no entry, child or pin: the caller caches an entry there or pins it (or extends a
// path below it) before anything can free it. For toks that are not exactly Unit tokens it
// returns NoNode and changes nothing (a longer unit would overwrite the next node's tokens),
// as it does for a node it would make inside a BatchTierEvents batch.
func (t *GroupTree) Ensure(parent Node, toks []int32) Node {
	if len(toks) != t.unit {
		return NoNode
	}
	if h := t.nodes[parent].hint; h != 0 && sameUnit(t.tokens(h), toks) {
		return h
	}
	key := unitKey(t.nodes[parent].key, toks)
	if n := t.child(parent, key, toks); n != 0 {
		return n
	}
	if t.inBatch() {
		return NoNode
	}
	n := t.newNode()
	t.nodes[n] = gnode{key: key, parent: parent}
	copy(t.ntok[int(n)*t.unit:], toks)
	t.nodes[parent].children++
	if t.nodes[parent].hint == 0 {
		t.nodes[parent].hint = n
	}
	t.live++
	if t.live*2 > len(t.slots) {
		t.grow()
	}
	t.insertSlot(n)
	if t.ev != nil {
		t.hashNode(n, parent)
	}
	return n
}

func (t *GroupTree) insertSlot(n Node) {
	mask := len(t.slots) - 1
	i := t.slot(t.nodes[n].key)
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = n
}

func (t *GroupTree) grow() {
	old := t.slots
	t.setTable(len(old) * 2)
	for _, n := range old {
		if n != 0 {
			t.insertSlot(n)
		}
	}
}

// removeSlot deletes n from the table with backward-shift deletion (linear probing).
func (t *GroupTree) removeSlot(n Node) {
	mask := len(t.slots) - 1
	i := t.slot(t.nodes[n].key)
	for t.slots[i] != n {
		i = (i + 1) & mask
	}
	for {
		t.slots[i] = 0
		j := i
		for {
			j = (j + 1) & mask
			m := t.slots[j]
			if m == 0 {
				return
			}
			h := t.slot(t.nodes[m].key)
			// m may move to i if its home h is not cyclically within (i, j].
			if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
				t.slots[i] = m
				i = j
				break
			}
		}
	}
}
