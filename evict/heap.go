package evict

import (
	"cmp"
	"fmt"
)

// rankHeap is an indexed binary min-heap of keys ranked by (a, b, key), ascending. Every
// heap-ordered policy maps its definition onto the two ranks (LRU: a = LastAccess; MRU:
// a = ^LastAccess; LFU: a = aged score, b = LastAccess; ...), so that the tie-break by
// smallest key is shared by all of them and written once.
//
// Entries live in a slab (slots) and the heap holds slab indices; each slot remembers its
// heap position. A swap therefore writes two slice elements rather than two map entries,
// and the map from key to slot is touched once per operation. Dead slots are reused through
// a free list, so once the slab, heap and map have reached their working size no operation
// allocates.
type rankHeap[K cmp.Ordered] struct {
	slots []rankSlot[K]
	free  []int32
	heap  []int32
	index map[K]int32
}

type rankSlot[K cmp.Ordered] struct {
	key  K
	a, b uint64
	at   int32 // position in heap
}

func newRankHeap[K cmp.Ordered]() rankHeap[K] {
	return rankHeap[K]{index: make(map[K]int32)}
}

func (h *rankHeap[K]) len() int { return len(h.heap) }

func (h *rankHeap[K]) less(i, j int) bool {
	x, y := &h.slots[h.heap[i]], &h.slots[h.heap[j]]
	if x.a != y.a {
		return x.a < y.a
	}
	if x.b != y.b {
		return x.b < y.b
	}
	return x.key < y.key
}

func (h *rankHeap[K]) swap(i, j int) {
	h.heap[i], h.heap[j] = h.heap[j], h.heap[i]
	h.slots[h.heap[i]].at = int32(i)
	h.slots[h.heap[j]].at = int32(j)
}

func (h *rankHeap[K]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *rankHeap[K]) down(i int) {
	n := len(h.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

// push inserts key with ranks (a, b), or re-ranks it if it is present.
func (h *rankHeap[K]) push(key K, a, b uint64) {
	if s, ok := h.index[key]; ok {
		sl := &h.slots[s]
		sl.a, sl.b = a, b
		i := int(sl.at)
		h.up(i)
		h.down(int(h.slots[s].at))
		return
	}
	var s int32
	if n := len(h.free); n > 0 {
		s = h.free[n-1]
		h.free = h.free[:n-1]
	} else {
		s = int32(len(h.slots))
		h.slots = append(h.slots, rankSlot[K]{})
	}
	i := len(h.heap)
	h.slots[s] = rankSlot[K]{key: key, a: a, b: b, at: int32(i)}
	h.heap = append(h.heap, s)
	h.index[key] = s
	h.up(i)
}

func (h *rankHeap[K]) has(key K) bool {
	_, ok := h.index[key]
	return ok
}

func (h *rankHeap[K]) remove(key K) bool {
	s, ok := h.index[key]
	if !ok {
		return false
	}
	h.removeAt(int(h.slots[s].at))
	return true
}

func (h *rankHeap[K]) removeAt(i int) {
	s := h.heap[i]
	last := len(h.heap) - 1
	if i != last {
		h.swap(i, last)
	}
	h.heap = h.heap[:last]
	delete(h.index, h.slots[s].key)
	var zero K
	h.slots[s] = rankSlot[K]{key: zero, at: -1}
	h.free = append(h.free, s)
	if i < last {
		h.up(i)
		h.down(int(h.slots[h.heap[i]].at))
	}
}

// peek returns the minimum without removing it.
func (h *rankHeap[K]) peek() (key K, a, b uint64, ok bool) {
	if len(h.heap) == 0 {
		return key, 0, 0, false
	}
	sl := &h.slots[h.heap[0]]
	return sl.key, sl.a, sl.b, true
}

// pop removes and returns the minimum.
func (h *rankHeap[K]) pop() (K, bool) {
	if len(h.heap) == 0 {
		var zero K
		return zero, false
	}
	key := h.slots[h.heap[0]].key
	h.removeAt(0)
	return key, true
}

func (h *rankHeap[K]) reset() {
	h.slots = h.slots[:0]
	h.free = h.free[:0]
	h.heap = h.heap[:0]
	clear(h.index)
}

// check verifies the heap order, the slot back-pointers, the key index and the free list.
func (h *rankHeap[K]) check() error {
	if len(h.index) != len(h.heap) {
		return fmt.Errorf("rankHeap: %d keys indexed, %d in heap", len(h.index), len(h.heap))
	}
	if len(h.heap)+len(h.free) != len(h.slots) {
		return fmt.Errorf("rankHeap: %d in heap + %d free != %d slots", len(h.heap), len(h.free), len(h.slots))
	}
	for i, s := range h.heap {
		sl := &h.slots[s]
		if int(sl.at) != i {
			return fmt.Errorf("rankHeap: slot %d says heap position %d, is at %d", s, sl.at, i)
		}
		if got, ok := h.index[sl.key]; !ok || got != s {
			return fmt.Errorf("rankHeap: key %v indexed at slot %d, found in slot %d", sl.key, got, s)
		}
		if i > 0 && h.less(i, (i-1)/2) {
			return fmt.Errorf("rankHeap: heap order broken at position %d", i)
		}
	}
	for _, s := range h.free {
		if h.slots[s].at != -1 {
			return fmt.Errorf("rankHeap: free slot %d is still at heap position %d", s, h.slots[s].at)
		}
	}
	return nil
}
