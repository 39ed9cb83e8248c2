package evict

import (
	"cmp"
	"slices"
)

// seqCompare orders two sequences for preemption: negative when a is to be preempted
// before b, zero when the policy does not tell them apart.
type seqCompare func(a, b *Candidate) int

// scanPicks is how many victims selectVictims finds by scanning before it sorts instead.
const scanPicks = 4

// selectVictims appends to dst the indices of running, in the order of compare (ties by
// smallest ID, then smallest index: a total order), until their Freeable blocks add up to
// need; when even all of them fall short, it appends all of them.
//
// A preemption usually needs one or two victims, so the first picks are found by scanning:
// each is the first sequence, in the total order, strictly after the previous pick (O(n) a
// pick, no scratch memory). If more are needed and dst has room for every sequence, the
// rest are heap-selected in dst's spare capacity (O(n + k log n) for k more victims);
// otherwise scanning goes on. Either way nothing is allocated when dst has room for the
// victims.
func selectVictims(dst []int, running []Candidate, need int, compare seqCompare) []int {
	if need <= 0 || len(running) == 0 {
		return dst
	}
	order := func(i, j int) int {
		if c := compare(&running[i], &running[j]); c != 0 {
			return c
		}
		if c := cmp.Compare(running[i].ID, running[j].ID); c != 0 {
			return c
		}
		return cmp.Compare(i, j)
	}
	base := len(dst)
	freed, prev := 0, -1
	for picks := 0; picks < len(running); picks++ {
		if picks == scanPicks && cap(dst)-base >= len(running) {
			return heapRest(dst, running, need, freed, prev, order)
		}
		best := -1
		for i := range running {
			if prev >= 0 && order(i, prev) <= 0 {
				continue // already picked, or before the last pick
			}
			if best < 0 || order(i, best) < 0 {
				best = i
			}
		}
		dst = append(dst, best)
		freed += max(running[best].Freeable, 0)
		if freed >= need {
			break
		}
		prev = best
	}
	return dst
}

// heapRest finishes selectVictims once dst ends with the first picks, prev the last of
// them: it appends every sequence after prev, arranges them as a binary min-heap in the
// total order, and pops just enough. Each pop moves the minimum to the end of the shrinking
// heap, so the victims collect, last first, at the end of the region; they are reversed
// and moved up behind the first picks.
func heapRest(dst []int, running []Candidate, need, freed, prev int, order func(i, j int) int) []int {
	start := len(dst)
	for i := range running {
		if order(i, prev) > 0 {
			dst = append(dst, i)
		}
	}
	h := dst[start:]
	less := func(x, y int) bool { return order(h[x], h[y]) < 0 }
	down := func(i, n int) {
		for {
			c := 2*i + 1
			if c >= n {
				return
			}
			if c+1 < n && less(c+1, c) {
				c++
			}
			if !less(c, i) {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	n := len(h)
	for i := n/2 - 1; i >= 0; i-- {
		down(i, n)
	}
	for n > 0 {
		n--
		h[0], h[n] = h[n], h[0]
		down(0, n)
		freed += max(running[h[n]].Freeable, 0)
		if freed >= need {
			break
		}
	}
	picked := h[n:]
	slices.Reverse(picked)
	k := copy(h, picked)
	return dst[:start+k]
}
