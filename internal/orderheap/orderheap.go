// Package orderheap is the indexed binary min-heap both Managers (blocktable and
// blocktable/hybrid) keep their running sequences in, in their preemption policy's order,
// so that Preempt walks victims from the front and plans the release of those alone.
//
// The heap is the caller's slice of element pointers: each element records its own
// position (Ops.SetPos), so that removing or re-placing one is O(log n) with no search,
// and nothing allocates once the slice has grown. Without an order (ordered false) the
// slice is a plain list of the elements (pos their place in it; removal swaps the last one
// in), so that a caller can still list them without walking a map.
//
// The functions are generic over the element's struct type and an Ops type; Go calls
// Ops' methods through the instantiation's dictionary, a few instructions more per
// comparison and move than the two hand-written copies this replaced (bench/README.md,
// "Preemption cost", says how many).
//
// Not safe for concurrent use; it is always driven by its Manager's goroutine.
package orderheap

// Ops orders and places the heap's elements.
type Ops[E any] interface {
	// Before is the heap's strict total order (ties broken, by ID in both Managers).
	Before(a, b *E) bool
	// SetPos records e's position (-1 once removed), which the caller passes back to
	// Remove and Fix.
	SetPos(e *E, i int32)
}

func set[E any, O Ops[E]](h []*E, o O, i int, e *E) {
	h[i] = e
	o.SetPos(e, int32(i))
}

func up[E any, O Ops[E]](h []*E, o O, i int) {
	e := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if !o.Before(e, h[p]) {
			break
		}
		set(h, o, i, h[p])
		i = p
	}
	set(h, o, i, e)
}

// down sifts the element at i down and returns where it lands.
func down[E any, O Ops[E]](h []*E, o O, i int) int {
	e, n := h[i], len(h)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && o.Before(h[c+1], h[c]) {
			c++
		}
		if !o.Before(h[c], e) {
			break
		}
		set(h, o, i, h[c])
		i = c
	}
	set(h, o, i, e)
	return i
}

// Push adds e (not in the heap) and returns the heap.
func Push[E any, O Ops[E]](h []*E, o O, ordered bool, e *E) []*E {
	h = append(h, e)
	if ordered {
		up(h, o, len(h)-1) // sets e's position
	} else {
		o.SetPos(e, int32(len(h)-1))
	}
	return h
}

// Remove takes out e, at position pos (its recorded one; a no-op for -1, an element not
// in the heap), and returns the heap. The slot it frees is cleared, so that the heap
// keeps no pointer to a removed element. The caller passes pos so that reading it costs
// no call.
func Remove[E any, O Ops[E]](h []*E, o O, ordered bool, e *E, pos int32) []*E {
	if pos < 0 {
		return h
	}
	i, last := int(pos), len(h)-1
	o.SetPos(e, -1)
	if i != last {
		set(h, o, i, h[last])
	}
	h[last] = nil
	h = h[:last]
	if i != last && ordered {
		if down(h, o, i) == i {
			up(h, o, i)
		}
	}
	return h
}

// Fix re-places e, at position pos (a no-op for -1), after its key changed.
func Fix[E any, O Ops[E]](h []*E, o O, e *E, pos int32) {
	if pos < 0 {
		return
	}
	if i := int(pos); down(h, o, i) == i {
		up(h, o, i)
	}
}

// Next returns the heap's elements in order, one per call, without changing the heap:
// the frontier f, a heap of positions, holds the children of those returned so far
// (O(log k) a call for the k-th). Start a walk with the frontier [0] (none for an empty
// heap); Next returns the frontier to pass to the next call, and false once every
// element was returned.
func Next[E any, O Ops[E]](h []*E, o O, f []int32) (*E, []int32, bool) {
	if len(f) == 0 {
		return nil, f, false
	}
	top := f[0]
	last := len(f) - 1
	f[0] = f[last]
	f = f[:last]
	frontierDown(h, o, f, 0)
	for _, c := range [2]int32{2*top + 1, 2*top + 2} {
		if int(c) < len(h) {
			f = append(f, c)
			frontierUp(h, o, f, len(f)-1)
		}
	}
	return h[top], f, true
}

func frontierUp[E any, O Ops[E]](h []*E, o O, f []int32, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !o.Before(h[f[i]], h[f[p]]) {
			return
		}
		f[i], f[p] = f[p], f[i]
		i = p
	}
}

func frontierDown[E any, O Ops[E]](h []*E, o O, f []int32, i int) {
	n := len(f)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && o.Before(h[f[c+1]], h[f[c]]) {
			c++
		}
		if !o.Before(h[f[c]], h[f[i]]) {
			return
		}
		f[i], f[c] = f[c], f[i]
		i = c
	}
}
