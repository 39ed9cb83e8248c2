package evict

import "cmp"

// seqCompare orders two sequences for preemption: negative when a is to be preempted
// before b, zero when the policy does not tell them apart.
type seqCompare func(a, b *SeqInfo) int

// selectVictims appends to dst the indices of running, in the order of compare (ties by
// smallest ID, then smallest index), until their Freeable blocks add up to need; when even
// all of them fall short, it appends all of them. It sorts nothing and needs no scratch
// memory: each pick is the first sequence, in that total order, strictly after the previous
// pick, found by one scan. That is O(n) a victim, and a policy rarely needs more than a few.
func selectVictims(dst []int, running []SeqInfo, need int, compare seqCompare) []int {
	if need <= 0 {
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
	freed, prev := 0, -1
	for range running {
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
