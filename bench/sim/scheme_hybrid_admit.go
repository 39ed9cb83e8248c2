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
// the Manager's Admit counts for the whole prompt (each hit block nobody holds, taken off
// the free queue, and the blocks past the hit; an align group its running block only),
// and, when the prefill is split, the second running block each align group allocates
// for the last chunk while still holding the state at the split. The window release
// between the chunks only frees blocks, so the count is enough for both chunks.
func (p *hybridPool) need(req *hybrid.Request, hit, split int) int {
	n := len(req.Prompt)
	var hits [][]blocks.ID
	if hit > 0 {
		hits = p.m.HitBlocks(req.Prompt, hit)
	}
	need := 0
	for g, spec := range p.m.Groups() {
		bs := spec.BlockSize()
		required := ceilDiv(n, bs)
		hb, skip := 0, 0
		if hit > 0 && len(hits[g]) > 0 {
			hb = hit / bs
			skip = min(spec.Skipped(hit)/bs, hb)
			for _, b := range hits[g][skip:hb] {
				if p.m.Block(b).Refs == 0 {
					need++
				}
			}
		}
		if ma, ok := spec.(hybrid.Mamba); ok && ma.Mode == hybrid.MambaAlign {
			if required > hb {
				need++
			}
			if split < n && ceilDiv(n, bs) > ceilDiv(split, bs) {
				need++
			}
			continue
		}
		need += max(required-max(skip, hb), 0)
	}
	return need
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
			if p := &a.pools[i]; p.need(req, hit, split) > p.m.Stats().Free {
				return false, nil
			}
		}
	}
	req.Prefill = 0
	if split < n {
		req.Prefill = split - hit
	}
	id := blocktable.SeqID(s.req.ID)
	for i, p := range a.pools {
		got, err := p.m.Admit(id, req)
		if err == nil && split < n {
			err = p.m.Extend(id, n-split)
		}
		if err == nil && got != hit && len(a.pools) > 1 {
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
