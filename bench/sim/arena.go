package sim

import (
	"fmt"
	"slices"
)

// arena is a first-fit allocator over one contiguous address space of size token slots,
// the way a contiguous KV cache is carved up: every reservation is one region, and a freed
// region merges with free neighbours. Free space that lies in holes too small for the next
// request is external fragmentation, measured rather than assumed.
type arena struct {
	size  int
	holes []hole // free regions, sorted by start, never adjacent (merged)
	free  int    // sum of hole sizes
}

type hole struct{ start, size int }

func newArena(size int) *arena {
	return &arena{size: size, holes: []hole{{0, size}}, free: size}
}

// alloc reserves n slots at the lowest address where they fit and returns the offset;
// ok is false, and nothing changes, when no hole is large enough.
func (a *arena) alloc(n int) (offset int, ok bool) {
	for i := range a.holes {
		h := &a.holes[i]
		if h.size < n {
			continue
		}
		offset = h.start
		h.start += n
		h.size -= n
		if h.size == 0 {
			a.holes = slices.Delete(a.holes, i, i+1)
		}
		a.free -= n
		return offset, true
	}
	return 0, false
}

// release frees [offset, offset+n) and merges it with adjacent holes. Releasing space
// that is not allocated is a broken invariant of the simulator: it panics.
func (a *arena) release(offset, n int) {
	i, _ := slices.BinarySearchFunc(a.holes, offset, func(h hole, off int) int { return h.start - off })
	if offset < 0 || n <= 0 || offset+n > a.size ||
		(i > 0 && a.holes[i-1].start+a.holes[i-1].size > offset) ||
		(i < len(a.holes) && a.holes[i].start < offset+n) {
		panic(fmt.Sprintf("kvpage: broken invariant: arena release of [%d, %d) overlaps free space", offset, offset+n))
	}
	a.free += n
	mergePrev := i > 0 && a.holes[i-1].start+a.holes[i-1].size == offset
	mergeNext := i < len(a.holes) && a.holes[i].start == offset+n
	switch {
	case mergePrev && mergeNext:
		a.holes[i-1].size += n + a.holes[i].size
		a.holes = slices.Delete(a.holes, i, i+1)
	case mergePrev:
		a.holes[i-1].size += n
	case mergeNext:
		a.holes[i].start = offset
		a.holes[i].size += n
	default:
		a.holes = slices.Insert(a.holes, i, hole{offset, n})
	}
}

// freeBelow sums the holes smaller than n slots: free space that cannot hold a
// reservation of n.
func (a *arena) freeBelow(n int) int {
	sum := 0
	for _, h := range a.holes {
		if h.size < n {
			sum += h.size
		}
	}
	return sum
}

// checkInvariants verifies that the holes are sorted, disjoint, non-empty, not adjacent,
// inside the arena, and that their sizes add up to free.
func (a *arena) checkInvariants() error {
	sum, end := 0, -1
	for i, h := range a.holes {
		if h.size <= 0 || h.start < 0 || h.start+h.size > a.size {
			return fmt.Errorf("arena hole %d %+v is empty or outside [0, %d)", i, h, a.size)
		}
		if h.start <= end {
			return fmt.Errorf("arena hole %d %+v overlaps or touches the previous one, ending at %d", i, h, end)
		}
		end = h.start + h.size
		sum += h.size
	}
	if sum != a.free {
		return fmt.Errorf("arena holes add up to %d, free count is %d", sum, a.free)
	}
	return nil
}
