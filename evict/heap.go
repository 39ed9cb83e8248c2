package evict

import (
	"fmt"
)

// rankHeap is an indexed binary min-heap of dense keys 0..capacity-1 ranked by (a, b, key),
// ascending. Every heap-ordered policy maps its definition onto the two ranks (MRU:
// a = ^LastAccess; LFU: a = aged score, b = LastAccess; FIFO: a = arrival; ...), so that
// the tie-break by smallest key is shared by all of them and written once.
//
// Each key's ranks and heap position live in a flat slice indexed by the key, sized at
// construction, and the heap holds keys: a swap writes two heap slots and two positions,
// no operation touches a map, and nothing allocates after construction.
type rankHeap struct {
	slots []rankSlot // indexed by key
	heap  []int32    // keys
}

type rankSlot struct {
	a, b uint64
	at   int32 // heap position + 1; 0 = not in the heap
}

func newRankHeap(capacity int) rankHeap {
	return rankHeap{slots: make([]rankSlot, capacity), heap: make([]int32, 0, capacity)}
}

func (h *rankHeap) len() int { return len(h.heap) }

func (h *rankHeap) less(i, j int) bool {
	ki, kj := h.heap[i], h.heap[j]
	x, y := &h.slots[ki], &h.slots[kj]
	if x.a != y.a {
		return x.a < y.a
	}
	if x.b != y.b {
		return x.b < y.b
	}
	return ki < kj
}

func (h *rankHeap) swap(i, j int) {
	h.heap[i], h.heap[j] = h.heap[j], h.heap[i]
	h.slots[h.heap[i]].at = int32(i + 1)
	h.slots[h.heap[j]].at = int32(j + 1)
}

func (h *rankHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *rankHeap) down(i int) {
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
func (h *rankHeap) push(key int32, a, b uint64) {
	sl := &h.slots[key]
	sl.a, sl.b = a, b
	if sl.at != 0 {
		h.up(int(sl.at) - 1)
		h.down(int(h.slots[key].at) - 1)
		return
	}
	i := len(h.heap)
	h.heap = append(h.heap, key)
	sl.at = int32(i + 1)
	h.up(i)
}

func (h *rankHeap) has(key int32) bool { return h.slots[key].at != 0 }

func (h *rankHeap) remove(key int32) bool {
	at := h.slots[key].at
	if at == 0 {
		return false
	}
	h.removeAt(int(at) - 1)
	return true
}

func (h *rankHeap) removeAt(i int) {
	last := len(h.heap) - 1
	if i != last {
		h.swap(i, last)
	}
	h.slots[h.heap[last]].at = 0 // its ranks stay, for restore
	h.heap = h.heap[:last]
	if i < last {
		h.up(i)
		h.down(int(h.slots[h.heap[i]].at) - 1)
	}
}

// peek returns the minimum without removing it.
func (h *rankHeap) peek() (key int32, a, b uint64, ok bool) {
	if len(h.heap) == 0 {
		return 0, 0, 0, false
	}
	key = h.heap[0]
	sl := &h.slots[key]
	return key, sl.a, sl.b, true
}

// pop removes and returns the minimum.
func (h *rankHeap) pop() (int32, bool) {
	if len(h.heap) == 0 {
		return 0, false
	}
	key := h.heap[0]
	h.removeAt(0)
	return key, true
}

// restore makes key, removed from the heap since it was last pushed, a member again with
// the ranks it had (a removal keeps a key's ranks: see removeAt); a Restorer's Restore.
func (h *rankHeap) restore(key int32) {
	sl := &h.slots[key]
	if sl.at != 0 {
		panic(fmt.Sprintf("evict: Restore of key %d, a candidate", key))
	}
	h.push(key, sl.a, sl.b)
}

// rankOf returns the first rank key had when it was last pushed (0 for a key never pushed
// since the last reset).
func (h *rankHeap) rankOf(key int32) uint64 { return h.slots[key].a }

func (h *rankHeap) reset() {
	for _, k := range h.heap {
		h.slots[k] = rankSlot{}
	}
	h.heap = h.heap[:0]
}

// check verifies the heap order and the position of every key, in and out of the heap.
func (h *rankHeap) check() error {
	for i, k := range h.heap {
		if k < 0 || int(k) >= len(h.slots) {
			return fmt.Errorf("rankHeap: key %d at position %d is out of range", k, i)
		}
		if int(h.slots[k].at) != i+1 {
			return fmt.Errorf("rankHeap: key %d says heap position %d, is at %d", k, h.slots[k].at-1, i)
		}
		if i > 0 && h.less(i, (i-1)/2) {
			return fmt.Errorf("rankHeap: heap order broken at position %d", i)
		}
	}
	in := 0
	for _, s := range h.slots {
		if s.at != 0 {
			in++
		}
	}
	if in != len(h.heap) {
		return fmt.Errorf("rankHeap: %d keys have a position, %d in the heap", in, len(h.heap))
	}
	return nil
}
