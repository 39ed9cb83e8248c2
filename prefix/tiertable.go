package prefix

import "math/bits"

// entryTable finds the lower tiers' entries by chained key: an open-addressing table of
// entry indices (entry+1, 0 = empty) probed linearly from the key, built as the tree's
// childTable is (multiply-shift home slot, backward-shift deletion, no tombstones). It is
// sized once, two slots per entry the store can hold, so it never grows, never allocates
// and its load never passes 1/2. Keys are unique in it (a block whose key another entry
// already holds, a 64-bit collision, is not tiered: newEntryFromNode), so a probe stops at
// the first slot holding the key, and the caller verifies parent key and tokens. It
// replaced a Go map: a lookup past the device probes it once per block, and every
// committed block probes it once (tierCommitted), 3.3 million probes a W5 trace.
type entryTable struct {
	slots []int32 // entry+1, 0 = empty
	size  uint64  // len(slots)
	n     int     // entries in the table
}

func (t *entryTable) init(entries int) {
	n := max(8, entries*2)
	t.slots = make([]int32, n)
	t.size = uint64(n)
	t.n = 0
}

// home is the first slot probed for key (Lemire's multiply-shift range reduction).
func (t *entryTable) home(key uint64) uint64 {
	hi, _ := bits.Mul64(key, t.size)
	return hi
}

// step is the slot probed after slot i.
func (t *entryTable) step(i uint64) uint64 {
	if i++; i == t.size {
		return 0
	}
	return i
}

// find returns the entry holding key, or -1.
func (t *entryTable) find(key uint64, ents []tierEntry) int32 {
	for i := t.home(key); ; i = t.step(i) {
		s := t.slots[i]
		if s == 0 {
			return -1
		}
		if ents[s-1].key == key {
			return s - 1
		}
	}
}

// insert adds entry e under key, which no entry holds. The table never fills: it has
// twice the slots of the entries.
func (t *entryTable) insert(e int32, key uint64) {
	i := t.home(key)
	for t.slots[i] != 0 {
		i = t.step(i)
	}
	t.slots[i] = e + 1
	t.n++
}

// remove deletes entry e (whose key is key) with backward-shift deletion, which keeps
// every probe sequence unbroken without tombstones.
func (t *entryTable) remove(e int32, key uint64, ents []tierEntry) {
	i := t.home(key)
	for t.slots[i] != e+1 {
		if t.slots[i] == 0 {
			panic("kvpage: broken invariant: a live tier entry is missing from its table")
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
		k := t.home(ents[m-1].key)
		// m may move back to i only if its home slot is not cyclically in (i, j].
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.slots[i] = m
			i = j
		}
	}
	t.slots[i] = 0
	t.n--
}

func (t *entryTable) clear() {
	clear(t.slots)
	t.n = 0
}
