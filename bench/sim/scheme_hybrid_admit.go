package sim

import (
	"errors"
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
)

// alignSplit is where the hybrid scheme's prefill of n tokens, hit of them cached, stops
// its first chunk in Mamba align mode: vLLM's block-aligned split (hybrid.AlignedChunk)
// over the LCM of every kind's block, with the whole rest of the prompt as the step's
// budget (the simulator computes a prompt in one step, so the split is the one vLLM
// makes when the budget covers it: up to the prompt's last block boundary, then the
// rest). The state at that boundary is then cached, where a later prompt that shares the
// prefix, or the request itself readmitted, can hit. n means no split (not align mode,
// or nothing to split).
func (a *hybridAlloc) alignSplit(n, hit int) int {
	if !a.align || hit >= n {
		return n
	}
	return hit + hybrid.AlignedChunk(n, n, hit, n-hit, a.lcm, false)
}

// need is how many free blocks pool p must have for the hybrid scheme to admit req with
// hit tokens cached (the hit every pool serves), its first chunk ending at split: what
// the Manager's Admit counts for the whole prompt (hybrid.Manager.AdmitCost, its dry
// run: each hit block nobody holds, taken off the free queue, and the blocks past the
// hit; an align group its running block only), and, when the prefill is split, the
// second running block each align group allocates for the last chunk while still holding
// the state at the split. The window release between the chunks only frees blocks, so
// the count is enough for both chunks. A dry run that finds another hit than the pools'
// common one is an error: the admission would not be the one counted.
func (p *hybridPool) need(req *hybrid.Request, hit, split int) (int, error) {
	n := len(req.Prompt)
	prefill := req.Prefill
	req.Prefill = 0 // the whole prompt
	err := p.m.AdmitCost(req, &p.cost)
	req.Prefill = prefill
	if err != nil {
		return 0, err
	}
	if p.cost.Hit+p.cost.LoadTokens != hit { // a load is a hit: not computed
		return 0, fmt.Errorf("pool's dry run hits %d tokens and loads %d, the pools' common hit is %d", p.cost.Hit, p.cost.LoadTokens, hit)
	}
	need := p.cost.Need
	if split < n {
		for _, spec := range p.m.Groups() {
			bs := spec.BlockSize()
			if ma, ok := spec.(hybrid.Mamba); ok && ma.Mode == hybrid.MambaAlign && ceilDiv(n, bs) > ceilDiv(split, bs) {
				need++
			}
		}
	}
	return need, nil
}

// admitPools admits s, whose request is req with its hit (every pool's) fixed, into every
// pool, or into none: each pool's need is checked against its free blocks before any pool
// is touched, so a refusal leaves every pool as it was (no prompt blocks cached by a
// half-done admission). In align mode the prefill is split on block boundaries (see
// alignSplit): Admit takes the first chunk, Extend the rest.
func (a *hybridAlloc) admitPools(s *seq, req *hybrid.Request, hit int) (ok bool, err error) {
	n := len(req.Prompt)
	split := a.alignSplit(n, hit)
	if len(a.pools) > 1 || split < n {
		for i := range a.pools {
			p := &a.pools[i]
			need, err := p.need(req, hit, split)
			if err != nil {
				return false, fmt.Errorf("request %d: pool %d: %w", s.req.ID, i, err)
			}
			if need > p.m.Stats().Free {
				return false, nil
			}
		}
	}
	req.Prefill = 0
	if split < n {
		req.Prefill = split - hit
	}
	id := blocktable.SeqID(s.req.ID)
	for i := range a.pools {
		p := &a.pools[i]
		var err error
		p.res, err = p.m.AdmitTiered(id, req) // Admit without tiers
		got := p.res.Hit + p.res.LoadTokens
		if err == nil && split < n {
			err = p.m.Extend(id, n-split)
		}
		if err == nil && got != hit {
			err = fmt.Errorf("pool %d hit %d tokens, the pools' common hit is %d", i, got, hit)
		}
		if err != nil {
			if i == 0 && split == n && errors.Is(err, blocks.ErrOutOfBlocks) {
				return false, nil // one pool, one Admit: a refusal changed nothing
			}
			return false, fmt.Errorf("request %d: pool %d refused an admission its free blocks cover: %w", s.req.ID, i, err)
		}
	}
	return true, nil
}
