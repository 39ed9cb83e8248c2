package evict

import "cmp"

// timeHeap is an indexed binary heap of keys ordered by (time, key), ascending, or by
// (time descending, key ascending) when newestFirst is set. The position map lets Remove
// find a key in O(1) and fix the heap in O(log n). Once the map and slice have grown to
// their working size, no operation allocates.
type timeHeap[K cmp.Ordered] struct {
	items       []heapItem[K]
	pos         map[K]int
	newestFirst bool
}

type heapItem[K cmp.Ordered] struct {
	key K
	t   uint64
}

func newTimeHeap[K cmp.Ordered](newestFirst bool) timeHeap[K] {
	return timeHeap[K]{pos: make(map[K]int), newestFirst: newestFirst}
}

func (h *timeHeap[K]) less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if a.t != b.t {
		if h.newestFirst {
			return a.t > b.t
		}
		return a.t < b.t
	}
	return a.key < b.key
}

func (h *timeHeap[K]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.pos[h.items[i].key] = i
	h.pos[h.items[j].key] = j
}

func (h *timeHeap[K]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *timeHeap[K]) down(i int) {
	n := len(h.items)
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

// push inserts key at time t, or moves it there if it is present.
func (h *timeHeap[K]) push(key K, t uint64) {
	if i, ok := h.pos[key]; ok {
		h.items[i].t = t
		h.up(i)
		h.down(h.pos[key])
		return
	}
	h.items = append(h.items, heapItem[K]{key: key, t: t})
	i := len(h.items) - 1
	h.pos[key] = i
	h.up(i)
}

func (h *timeHeap[K]) remove(key K) bool {
	i, ok := h.pos[key]
	if !ok {
		return false
	}
	h.removeAt(i)
	return true
}

func (h *timeHeap[K]) removeAt(i int) {
	last := len(h.items) - 1
	key := h.items[i].key
	if i != last {
		h.swap(i, last)
	}
	h.items = h.items[:last]
	delete(h.pos, key)
	if i < last {
		h.up(i)
		h.down(i)
	}
}

func (h *timeHeap[K]) pop() (K, bool) {
	if len(h.items) == 0 {
		var zero K
		return zero, false
	}
	key := h.items[0].key
	h.removeAt(0)
	return key, true
}

func (h *timeHeap[K]) reset() {
	h.items = h.items[:0]
	clear(h.pos)
}
