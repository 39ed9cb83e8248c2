package hybrid_test

// The reference model's sparse retention: vLLM's reachable_block_mask of
// SlidingWindowManager and MambaManager (PRs #43447 and #45845) for the one reachable
// boundary the Manager models, the replay boundary num_prompt_tokens - 1, with the
// alignment the LCM of the block sizes (every group's block size here). It returns nil
// (cache every block) where vLLM returns None.
func (m *vmManager) reachableMask(r *vmRequest, g, start, end int) []bool {
	if m.retention == nil {
		return nil
	}
	interval, spec, bs, align := *m.retention, m.groups[g], m.bs, m.bs
	boundaries := []int{r.numPrompt - 1}
	mask := make([]bool, end-start)
	switch {
	case spec.window > 0:
		need := (spec.window - 1 + bs - 1) / bs
		shift := 0
		if m.eagle {
			need, shift = need+1, 1
		}
		if interval != 0 {
			per := interval / bs
			if need >= per {
				return nil
			}
			for i := start; i < end; i++ {
				if i >= shift && (i-shift)%per >= per-need {
					mask[i-start] = true
				}
			}
		}
		for _, b := range boundaries {
			last := b/align*align/bs + shift
			for j := max(start, last-need); j < min(end, last); j++ {
				mask[j-start] = true
			}
		}
	case spec.mamba:
		if interval != 0 {
			per := interval / bs
			if per <= 1 {
				return nil
			}
			for i := (start+per)/per*per - 1 - start; i < len(mask); i += per {
				mask[i] = true
			}
		}
		for _, b := range boundaries {
			if blk := b/align*align/bs - 1; start <= blk && blk < end {
				mask[blk-start] = true
			}
		}
	default:
		return nil
	}
	return mask
}
