package hybrid

import (
	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
)

// Mamba align mode, as vLLM's MambaManager with mamba_cache_mode "align": the state of a
// sequence lives in one running block, the last entry of its table; every allocation that
// moves the sequence into a new block gives it a new running block (the null block pads
// the entries between), into which the kernel copies the state from the block before. That
// block, the sequence's last state, is released at the next step once the sequence has
// moved past it. A running block that fills is cached like any full block, so the states
// at block boundaries are the ones a later prompt can hit; for them to exist, a prefill is
// split into chunks that end on block boundaries (AlignedChunk, vLLM's
// _mamba_block_aligned_split). Lookahead slots get no state block (vLLM allocates none in
// align mode: its draft models have no Mamba layers), and vLLM's speculative state blocks
// (num_speculative_blocks) are not modelled.

// growAligned gives align group g of s its running block for main tokens: when the
// tokens reach past the table, the last entry becomes the last state, the null block pads
// the table to one short of what main needs, and one block is allocated at its end.
func (m *Manager) growAligned(s *seq, g int, t []blocks.ID, main int) []blocks.ID {
	want := m.ceil(g, main)
	if len(t) >= want {
		return t
	}
	if len(t) > 0 {
		s.lastState[g] = len(t) - 1
	}
	for len(t) < want-1 {
		t = append(t, blocks.NullID)
	}
	t = append(t, m.st.alloc())
	m.hold(s, g, t[len(t)-1])
	return t
}

// staleState is the entry of align group g's last state block once s has moved past it
// (before the block holding its last computed token), or -1.
func (m *Manager) staleState(s *seq, g int) int {
	i := s.lastState[g]
	if i < 0 || i >= m.ceil(g, s.computed)-1 || s.tables[g][i] == blocks.NullID {
		return -1
	}
	return i
}

// pendingState reports whether some align group of s holds a last state block: it is
// released at the sequence's next step, so setQuiet gives it no quiet steps and the decode
// fast path, which releases nothing, needs no align check of its own.
func (m *Manager) pendingState(s *seq) bool {
	for g := range m.specs {
		if m.align[g] && s.lastState[g] >= 0 {
			return true
		}
	}
	return false
}

// scheduleExtra is schedule's count for forks and align groups, kept off the common path:
// a private copy for each group whose next write lands in a shared block, and for an
// align group its own count (alignSchedule) in place of the generic one.
func (m *Manager) scheduleExtra(s *seq, total, main int) (want, freed int) {
	for g := range m.specs {
		if s.forked {
			if _, ok := m.sharedWrite(s, g); ok {
				want++ // the private copy
			}
		}
		if m.align[g] {
			w, f := m.alignSchedule(s, g, main)
			want += w - max(m.ceil(g, total)-len(s.tables[g]), 0)
			freed += f
		}
	}
	return want, freed
}

// alignSchedule is schedule's count for align group g: the running block it allocates for
// main tokens, and the stale last state block the release frees (unless the window release
// already counted it, which frees the entries from the block before the skipped tokens'
// end down to the first null entry).
func (m *Manager) alignSchedule(s *seq, g, main int) (want, freed int) {
	t := s.tables[g]
	if m.ceil(g, main) > len(t) {
		want = 1
	}
	i := m.staleState(s, g)
	if i < 0 || m.st.ref(t[i]) != 1 {
		return want, 0
	}
	hi := min(m.div(g, m.specs[g].Skipped(s.computed)), len(t))
	lo := hi
	for lo > 0 && t[lo-1] != blocks.NullID {
		lo--
	}
	if i >= lo && i < hi {
		return want, 0
	}
	return want, 1
}

// releaseState releases align group g's stale last state block, as vLLM's
// remove_skipped_blocks does after the window release.
func (m *Manager) releaseState(s *seq, g int) {
	i := s.lastState[g]
	if i < 0 || i >= m.ceil(g, s.computed)-1 {
		return
	}
	if t := s.tables[g]; t[i] != blocks.NullID {
		m.dropping(s, g, t[i:i+1])
		m.st.releaseWindow(t[i : i+1]) // superseded mid-sequence: its eviction is EvictWindow
		t[i] = blocks.NullID
	}
	s.lastState[g] = -1 // done, also when the window release took it first
}

// AlignedChunk returns how many of the numNew prompt tokens a scheduler should compute
// next for a sequence of numTokens tokens (numPrompt of them prompt) with computed of them
// done, so that Mamba align mode caches the state at block boundaries: vLLM's
// Scheduler._mamba_block_aligned_split. While prefilling, a chunk that ends before the
// last block boundary of the sequence is cut down to whole blocks (but never to nothing:
// a chunk shorter than a block is kept, so the sequence progresses), and a chunk that
// crosses that boundary stops on it; the tokens past it come in the last chunk. With
// eagle, the last cached boundary is one block earlier (EAGLE drops the last matched
// block). Decode steps are returned as they are. blockSize is the Mamba group's block
// size (Manager.AlignedChunk uses the LCM of the groups').
func AlignedChunk(numTokens, numPrompt, computed, numNew, blockSize int, eagle bool) int {
	if blockSize <= 0 || computed >= max(numPrompt, numTokens-1) {
		return numNew
	}
	last := numTokens - numTokens%blockSize
	if eagle {
		last = max(last-blockSize, 0)
	}
	switch after := computed + numNew; {
	case after < last:
		if aligned := numNew / blockSize * blockSize; aligned > 0 {
			return aligned
		}
	case computed < last && last < after:
		return last - computed
	}
	return numNew
}

// AlignedChunk is the package's AlignedChunk for a running sequence id of this Manager
// (its tokens, prompt length and computed tokens, the LCM of the groups' block sizes and
// Config.Eagle): the next chunk of at most budget prompt tokens to Extend by. It returns 0
// for an unknown sequence or one with no prompt tokens left.
func (m *Manager) AlignedChunk(id blocktable.SeqID, budget int) int {
	s, ok := m.lookup(id)
	if !ok || s.computed >= len(s.tokens) || budget <= 0 {
		return 0
	}
	return AlignedChunk(len(s.tokens), s.promptLen, s.computed, min(budget, len(s.tokens)-s.computed), m.lcm, m.eagle)
}
