package prefix

// childTable is the one table of parent-to-child links for the whole tree: an open-addressing
// hash table of node indices, probed linearly from the child's chained key. A child is found
// by (parent, key) and then confirmed on its tokens and extra keys, so colliding keys only
// cost probes, never a false hit. It is sized once, for every block of the pool at a load of
// at most 3/4, so it never grows: 4 bytes a slot, 5.3 to 10.7 bytes a block.
type childTable struct {
	slots []int32 // node index, 0 = empty
	mask  uint64
}

func (t *childTable) init(capacity int) {
	n := 8
	for n*3 < capacity*4 {
		n <<= 1
	}
	t.slots = make([]int32, n)
	t.mask = uint64(n - 1)
}

// home is the first slot probed for key (matchText inlines the same expression).
func (t *childTable) home(key uint64) uint64 { return (key ^ key>>29) & t.mask }

// insert adds node n, whose key is key. The table never fills: cached blocks are at most the
// pool's capacity.
func (t *childTable) insert(n int32, key uint64) {
	i := t.home(key)
	for t.slots[i] != 0 {
		i = (i + 1) & t.mask
	}
	t.slots[i] = n
}

// remove deletes node n (whose key is key) with backward-shift deletion, which keeps every
// probe sequence unbroken without tombstones.
func (t *childTable) remove(n int32, key uint64, nodes []node) {
	i := t.home(key)
	for t.slots[i] != n {
		if t.slots[i] == 0 {
			panic("kvpage: broken invariant: cached block missing from the child table")
		}
		i = (i + 1) & t.mask
	}
	j := i
	for {
		j = (j + 1) & t.mask
		m := t.slots[j]
		if m == 0 {
			break
		}
		k := t.home(nodes[m].key)
		// m may move back to i only if its home slot is not cyclically in (i, j].
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.slots[i] = m
			i = j
		}
	}
	t.slots[i] = 0
}

func (t *childTable) clear() { clear(t.slots) }
