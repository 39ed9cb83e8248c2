package prefix

// childTable is the one table of parent-to-child links for the whole tree: an open-addressing
// hash table of node indices, probed linearly from the child's chained key, that holds every
// cached block but its parent's hint (see Index.nodes). A child is found
// by (parent, key) and then confirmed on its tokens and extra keys, so colliding keys only
// cost probes, never a false hit.
//
// Each slot holds the node and its key's high 32 bits (its tag), from which the home slot is
// computed too, as the lower tiers' entryTable does: a probe reads a node only on a tag
// match, and a deletion's backward shift, which must know the home slot of every slot after
// the deleted one up to the next empty one, reads no node at all. With node indices alone
// both read the nodes in the probed slots, a cache miss each on a pool larger than the
// cache: in the simulator's sharing run, where every allocation evicts, those reads were 8%
// of the last-level misses (bench/README.md, the sharing run's steps).
//
// It is sized once, two slots for every block of the pool, so it never grows and its load
// never passes 1/2: 16 bytes per pool block, as the four 4-byte slots a block it had
// before, whose load of 1/4 kept the clusters (and the node reads in them) short. The size
// need not be a power of two (a tag's home slot is the high half of tag x size).
type childTable struct {
	slots []childSlot
	size  uint64 // len(slots), below 2^32
}

// childSlot is one slot: node 0 (never a child) marks it empty.
type childSlot struct {
	n   int32
	tag uint32 // the node's key >> 32
}

func (t *childTable) init(capacity int) {
	n := max(8, capacity*2)
	t.slots = make([]childSlot, n)
	t.size = uint64(n)
}

// home is the first slot probed for a key of tag tag: the tag scaled to [0, size) (Lemire's
// multiply-shift range reduction: one multiply, no division). The tag is a hashed key's high
// half, so it spreads evenly; size < 2^32 (a pool has fewer than 2^31 blocks).
func (t *childTable) home(tag uint32) uint64 { return uint64(tag) * t.size >> 32 }

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
	tag := keyTag(key)
	i := t.home(tag)
	for t.slots[i].n != 0 {
		i = t.step(i)
	}
	t.slots[i] = childSlot{n: n, tag: tag}
}

// remove deletes node n (whose key is key) with backward-shift deletion, which keeps every
// probe sequence unbroken without tombstones.
func (t *childTable) remove(n int32, key uint64) {
	i := t.home(keyTag(key))
	for t.slots[i].n != n {
		if t.slots[i].n == 0 {
			panic("kvpage: broken invariant: cached block missing from the child table")
		}
		i = t.step(i)
	}
	j := i
	for {
		j = t.step(j)
		m := t.slots[j]
		if m.n == 0 {
			break
		}
		k := t.home(m.tag)
		// m may move back to i only if its home slot is not cyclically in (i, j].
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.slots[i] = m
			i = j
		}
	}
	t.slots[i] = childSlot{}
}

func (t *childTable) clear() { clear(t.slots) }
