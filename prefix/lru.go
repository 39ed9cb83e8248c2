package prefix

import "github.com/kvpage/kvpage/blocks"

// denseLRU is the built-in default eviction order: the evictable blocks in a binary heap
// ordered by (last access, block ID), exactly as evict.LRU orders them, but specialised to
// dense block IDs: the heap holds IDs (4 bytes), each block's heap position sits in a flat
// slice (4 bytes) and times are read from the index's nodes, so it costs 8 bytes a block and
// no map. Any other policy of package evict plugs in through WithPolicy instead.
type denseLRU struct {
	heap []blocks.ID
	pos  []int32 // heap index + 1 per block; 0 = not a candidate
}

func (l *denseLRU) init(numBlocks int) {
	l.heap = make([]blocks.ID, 0, numBlocks)
	l.pos = make([]int32, numBlocks)
}

// lruLess orders candidates a and b: older last access first, then smaller ID.
func (x *Index) lruLess(a, b blocks.ID) bool {
	ta, tb := x.nodes[a+1].lastAccess, x.nodes[b+1].lastAccess
	if ta != tb {
		return ta < tb
	}
	return a < b
}

func (x *Index) lruSet(i int, id blocks.ID) {
	x.lru.heap[i] = id
	x.lru.pos[id] = int32(i + 1)
}

func (x *Index) lruUp(i int) {
	h := x.lru.heap
	id := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if !x.lruLess(id, h[p]) {
			break
		}
		x.lruSet(i, h[p])
		i = p
	}
	x.lruSet(i, id)
}

func (x *Index) lruDown(i int) {
	h := x.lru.heap
	n := len(h)
	id := h[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && x.lruLess(h[r], h[l]) {
			m = r
		}
		if !x.lruLess(h[m], id) {
			break
		}
		x.lruSet(i, h[m])
		i = m
	}
	x.lruSet(i, id)
}

func (x *Index) lruAdd(id blocks.ID) {
	x.lru.heap = append(x.lru.heap, id)
	i := len(x.lru.heap) - 1
	x.lru.pos[id] = int32(i + 1)
	x.lruUp(i)
}

func (x *Index) lruRemoveAt(i int) {
	h := x.lru.heap
	last := len(h) - 1
	x.lru.pos[h[i]] = 0
	if i == last {
		x.lru.heap = h[:last]
		return
	}
	moved := h[last]
	x.lru.heap = h[:last]
	x.lruSet(i, moved)
	x.lruUp(i)
	x.lruDown(int(x.lru.pos[moved]) - 1)
}

// The eviction set: unreferenced leaves, in policy order. These wrappers pick the dense LRU
// or the configured policy.

func (x *Index) evAdd(n int32) {
	id := blockOf(n)
	if x.policy == nil {
		x.lruAdd(id)
		return
	}
	nd := &x.nodes[n]
	x.policy.Add(evictEntry(id, nd))
}

// evRemove takes node n out of the eviction set if it is there. It is small enough to be
// inlined: most callers (Acquire along a hit path, a parent gaining a child) find the
// block not in the set, and that answer costs one load of the dense LRU's position.
func (x *Index) evRemove(n int32) bool {
	if x.policy != nil || x.lru.pos[n-1] != 0 { // pos is indexed by block: n-1
		return x.evRemoveSlow(n)
	}
	return false
}

func (x *Index) evRemoveSlow(n int32) bool {
	id := blockOf(n)
	if x.policy == nil {
		x.lruRemoveAt(int(x.lru.pos[id] - 1))
		return true
	}
	return x.policy.Remove(id)
}

func (x *Index) evLen() int {
	if x.policy == nil {
		return len(x.lru.heap)
	}
	return x.policy.Len()
}

func (x *Index) evReset() {
	if x.policy == nil {
		for _, id := range x.lru.heap {
			x.lru.pos[id] = 0
		}
		x.lru.heap = x.lru.heap[:0]
		return
	}
	x.policy.Reset()
}
