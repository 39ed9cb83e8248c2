package prefix

// entryTable finds the lower tiers' entries by chained key: an open-addressing table
// probed linearly, built as the tree's childTable is (multiply-shift home slot,
// backward-shift deletion, no tombstones). Each slot holds an entry index (entry+1, 0 =
// empty) and its key's high 32 bits, from which the home slot is computed too, so that a
// probe reads the entries only on a tag match: most committed blocks have no entry
// (tierCommitted probes each), and the entries, over a hundred bytes each, would cost a
// cache miss per probed slot. It is sized once, two slots per entry the store can hold,
// so it never grows, never allocates and its load never passes 1/2 (8 bytes a slot: 64 KiB
// for W5's 4,096-block host tier). Keys are unique in it (a block whose key another entry
// already holds, a 64-bit collision, is not tiered: newEntryFromNode), so a probe stops at
// the first slot holding the key, and the caller verifies parent key and tokens. It
// replaced a Go map: a lookup past the device probes it once per block, and every
// committed block probes it once, 2.5 million probes a W5 trace.
type entryTable struct {
	slots []entrySlot
	size  uint64 // len(slots), below 2^32
	n     int    // entries in the table
}

type entrySlot struct {
	e   int32  // entry+1, 0 = empty
	tag uint32 // the entry's key >> 32
}

func (t *entryTable) init(entries int) {
	n := max(8, entries*2)
	t.slots = make([]entrySlot, n)
	t.size = uint64(n)
	t.n = 0
}

func keyTag(key uint64) uint32 { return uint32(key >> 32) }

// home is the first slot probed for a key of tag tag (Lemire's multiply-shift range
// reduction of the tag, which a hashed key spreads evenly).
func (t *entryTable) home(tag uint32) uint64 { return uint64(tag) * t.size >> 32 }

// step is the slot probed after slot i.
func (t *entryTable) step(i uint64) uint64 {
	if i++; i == t.size {
		return 0
	}
	return i
}

// find returns the entry holding key, or -1.
func (t *entryTable) find(key uint64, ents []tierEntry) int32 {
	tag := keyTag(key)
	for i := t.home(tag); ; i = t.step(i) {
		s := t.slots[i]
		if s.e == 0 {
			return -1
		}
		if s.tag == tag && ents[s.e-1].key == key {
			return s.e - 1
		}
	}
}

// insert adds entry e under key, which no entry holds. The table never fills: it has
// twice the slots of the entries.
func (t *entryTable) insert(e int32, key uint64) {
	tag := keyTag(key)
	i := t.home(tag)
	for t.slots[i].e != 0 {
		i = t.step(i)
	}
	t.slots[i] = entrySlot{e: e + 1, tag: tag}
	t.n++
}

// remove deletes entry e (whose key is key) with backward-shift deletion, which keeps
// every probe sequence unbroken without tombstones.
func (t *entryTable) remove(e int32, key uint64) {
	i := t.home(keyTag(key))
	for t.slots[i].e != e+1 {
		if t.slots[i].e == 0 {
			panic("kvpage: broken invariant: a live tier entry is missing from its table")
		}
		i = t.step(i)
	}
	j := i
	for {
		j = t.step(j)
		m := t.slots[j]
		if m.e == 0 {
			break
		}
		k := t.home(m.tag)
		// m may move back to i only if its home slot is not cyclically in (i, j].
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.slots[i] = m
			i = j
		}
	}
	t.slots[i] = entrySlot{}
	t.n--
}

func (t *entryTable) clear() {
	clear(t.slots)
	t.n = 0
}
