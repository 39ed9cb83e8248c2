package prefix

import "math/bits"

// childTable is the one table of parent-to-child links for the whole tree: an open-addressing
// hash table of node indices, probed linearly from the child's chained key. A child is found
// by (parent, key) and then confirmed on its tokens and extra keys, so colliding keys only
// cost probes, never a false hit. It is sized once, four slots for every block of the pool,
// so it never grows and its load never passes 1/4: a full pool (W3's steady state) is the
// common case, and every eviction deletes a key by backward shift, which reads the key of
// each slot after it up to the next empty one. At a load of 3/4 linear probing's clusters
// made W3 1.45x slower; at 1/2 the deletions still cost 122 instructions each on W3 and
// the insertions 20 in their probe loop; at 1/4 the clusters are short enough to halve
// both (3.4% of W3's instructions, see bench/README.md) for 8 more bytes per block. The
// size need not be a power of two (a key's home slot is the high half of key x size), so
// the table costs exactly 16 bytes per pool block.
type childTable struct {
	slots []int32 // node index, 0 = empty
	size  uint64  // len(slots)
}

func (t *childTable) init(capacity int) {
	n := max(8, capacity*4)
	t.slots = make([]int32, n)
	t.size = uint64(n)
}

// home is the first slot probed for key: key scaled to [0, size) by its high bits, which a
// hashed key spreads evenly (Lemire's multiply-shift range reduction: one multiply, no
// division).
func (t *childTable) home(key uint64) uint64 {
	hi, _ := bits.Mul64(key, t.size)
	return hi
}

// step is the slot probed after slot i.
func (t *childTable) step(i uint64) uint64 {
	if i++; i == t.size {
		return 0
	}
	return i
}

// insert adds node n, whose key is key. The table never fills: cached blocks are at most the
// pool's capacity.
func (t *childTable) insert(n int32, key uint64) {
	i := t.home(key)
	for t.slots[i] != 0 {
		i = t.step(i)
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
		i = t.step(i)
	}
	j := i
	for {
		j = t.step(j)
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
