package hybrid_test

import (
	"slices"

	"github.com/kvpage/kvpage/blocktable"
)

// The reference model's forks and preemption. vLLM has neither copy-on-write forks nor a
// preemption policy beyond its FCFS queue, so these are written from the Manager's
// documented contract, as plainly as possible: a fork holds one more reference on every
// block holding its parent's tokens; the first write into a shared, partly filled block
// takes a new block for it (allocateSlotsAhead); preemption frees a request as finishing
// does, newest first, until the blocks left unreferenced reach the need.

// sharedWrite reports whether a write at position computed of group g lands in a partly
// filled block another request holds too, and which entry it is.
func (m *vmManager) sharedWrite(r *vmRequest, g, computed int) (int, bool) {
	i := computed / m.bs
	bl := r.blocks[g]
	if computed%m.bs == 0 || i >= len(bl) || bl[i] == vmNull || m.pool.blocks[bl[i]].ref < 2 {
		return i, false
	}
	return i, true
}

// fork returns a request sharing every block that holds p's tokens.
func (m *vmManager) fork(p *vmRequest) *vmRequest {
	c := &vmRequest{seed: p.seed, tokens: slices.Clone(p.tokens), hashes: slices.Clone(p.hashes),
		computed: p.computed, blocks: make([][]int, len(m.groups)), numCached: slices.Clone(p.numCached),
		lastState: slices.Clone(p.lastState), numPrompt: p.numPrompt}
	for g := range m.groups {
		c.blocks[g] = slices.Clone(p.blocks[g][:(p.computed+m.bs-1)/m.bs])
		for _, b := range c.blocks[g] {
			if b != vmNull {
				m.pool.blocks[b].ref++
			}
		}
	}
	return c
}

// vmRunning is a running request of the state-machine test with its logical arrival.
type vmRunning struct {
	req     *vmRequest
	arrival uint64
}

// preempt picks FCFS victims (newest first) among live minus protect until the blocks
// their release leaves unreferenced reach need, and frees them in that order; it returns
// the victims, or nil and what all candidates would free when that falls short (freeing
// nothing).
func (m *vmManager) preempt(live map[blocktable.SeqID]*vmRunning, protect blocktable.SeqID, need int) ([]blocktable.SeqID, int) {
	var order []blocktable.SeqID
	for id := range live {
		if id != protect {
			order = append(order, id)
		}
	}
	slices.SortFunc(order, func(a, b blocktable.SeqID) int {
		if live[a].arrival > live[b].arrival {
			return -1
		}
		return 1
	})
	drops := map[int]int{}
	gain, k := 0, 0
	for ; k < len(order) && gain < need; k++ {
		for _, bl := range live[order[k]].req.blocks {
			for _, b := range bl {
				if b == vmNull {
					continue
				}
				if drops[b]++; drops[b] == m.pool.blocks[b].ref {
					gain++
				}
			}
		}
	}
	if gain < need {
		return nil, gain
	}
	for _, id := range order[:k] {
		m.free(live[id].req)
	}
	return order[:k], gain
}
