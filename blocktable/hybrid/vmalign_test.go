package hybrid_test

// The reference model's Mamba align mode: vLLM's MambaManager with mamba_cache_mode
// "align" (get_num_blocks_to_allocate, allocate_new_blocks, remove_skipped_blocks), with
// no speculative blocks (num_speculative_blocks = 0), written after vLLM's code.

// alignNeed is get_num_blocks_to_allocate in align mode: one block when the tokens reach
// past the table (the running state block), plus the evictable hit blocks.
func (m *vmManager) alignNeed(r *vmRequest, g, numTokens int, newComputed []int) int {
	required := (numTokens + m.bs - 1) / m.bs
	n := 0
	if required-len(newComputed)-len(r.blocks[g]) > 0 {
		n = 1
	}
	for _, b := range newComputed {
		if b != vmNull && m.pool.blocks[b].ref == 0 {
			n++
		}
	}
	return n
}

// alignAllocate is allocate_new_blocks in align mode: the previous last entry becomes the
// last state, null blocks pad the table to one short of what the tokens need, and one new
// block is the running state.
func (m *vmManager) alignAllocate(r *vmRequest, g, numTokens int) {
	required := (numTokens + m.bs - 1) / m.bs
	bl := r.blocks[g]
	if required <= len(bl) {
		return
	}
	if len(bl) > 0 {
		r.lastState[g] = len(bl) - 1
	}
	for len(bl) < required-1 {
		bl = append(bl, vmNull)
	}
	r.blocks[g] = append(bl, m.pool.getNewBlocks(required-len(bl))...)
}

// alignRemoveLastState is remove_skipped_blocks' align step: the last state block goes once
// the request has moved past it.
func (m *vmManager) alignRemoveLastState(r *vmRequest, g, computed int) {
	i := r.lastState[g]
	if i >= 0 && i < (computed+m.bs-1)/m.bs-1 && r.blocks[g][i] != vmNull {
		m.pool.freeBlocks([]int{r.blocks[g][i]})
		r.blocks[g][i] = vmNull
	}
}
