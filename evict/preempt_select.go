package evict

import (
	"cmp"
	"slices"
)

// seqCompare orders two sequences for preemption: negative when a is to be preempted
// before b, zero when the policy does not tell them apart.
type seqCompare func(a, b *SeqInfo) int

// scanPicks is how many victims selectVictims finds by scanning before it sorts instead.
const scanPicks = 4

// selectVictims appends to dst the indices of running, in the order of compare (ties by
// smallest ID, then smallest index: a total order), until their Freeable blocks add up to
// need; when even all of them fall short, it appends all of them.
//
// A preemption usually needs one or two victims, so the first picks are found by scanning:
// each is the first sequence, in the total order, strictly after the previous pick (O(n) a
// pick, no scratch memory). If more are needed and dst has room for every sequence, the
// rest are sorted in dst's spare capacity (O(n log n)); otherwise scanning goes on. Either
// way nothing is allocated when dst has room for the victims.
func selectVictims(dst []int, running []SeqInfo, need int, compare seqCompare) []int {
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
			return sortRest(dst, running, need, freed, prev, order)
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

// sortRest finishes selectVictims once dst ends with the first picks, prev the last of
// them: it appends every sequence after prev, sorts them, and keeps just enough.
func sortRest(dst []int, running []SeqInfo, need, freed, prev int, order func(i, j int) int) []int {
	start := len(dst)
	for i := range running {
		if order(i, prev) > 0 {
			dst = append(dst, i)
		}
	}
	rest := dst[start:]
	slices.SortFunc(rest, order)
	for n, i := range rest {
		freed += max(running[i].Freeable, 0)
		if freed >= need {
			return dst[:start+n+1]
		}
	}
	return dst
}
