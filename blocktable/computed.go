package blocktable

// What the server has computed. Admit and Append give a sequence slots for tokens whose
// KV the server's next forward pass writes; until that pass has run, those blocks hold no
// KV. The Manager learns that it has from NewStep, which a server calls at the start of
// each scheduler step (vLLM's scheduler calls its KV cache manager's new_step_starts the
// same way): every token given a slot before the call is computed, those given slots
// since are not. Swap preemption copies into the lower tiers only the full blocks whose
// KV is computed (appendSwapIDs), so that a sequence swapped out in the step that
// admitted it, or that filled a block with this step's token, copies no block without
// KV; Resume computes those blocks again. A device hit is computed at admission, and a
// load from a lower tier once CompleteTransfer confirms it.
//
// The record is per sequence and costs nothing on a call that fills no block: the first
// Append of a step that fills a block notes that the sequence's committed blocks before
// it are computed (fresh, at freshStep); tokens of this step before that lie in the block
// being filled. A sequence not noted in the current step has all its tokens computed,
// since a call that fills no block leaves its tokens in the partial last block, which no
// swap copies. Admit notes its hit, and a completed load the hit and the load.

// NewStep tells the Manager that the server's forward pass over every slot handed out so
// far has run: the KV of every running sequence's tokens is in its blocks, except those of
// a sequence whose load is still in flight (it computes past its load only once the load
// completes). A server that preempts in Swap mode calls it at the start of every
// scheduler step, before that step's Admit and Append calls. A server that never calls
// it keeps the older contract: the Manager then takes every slot it handed out as
// computed, and the server must not swap out a sequence between the call that gave it
// slots for a full block and the forward pass that fills them (the copy would read
// blocks with no KV). It costs O(1) and allocates nothing.
func (m *Manager) NewStep() { m.steps++ }

// markFresh notes, at the first call of the current step that fills a block of s, that
// before of its tokens are computed.
func (m *Manager) markFresh(s *sequence, before int) {
	if s.freshStep != m.steps+1 {
		s.fresh, s.freshStep = before, m.steps+1
	}
}

// computed is how many of s's tokens have their KV in its blocks, as far as the server
// has said (NewStep). Before the first NewStep the Manager has no word from the server,
// and takes every token as computed (the contract before NewStep existed).
func (m *Manager) computed(s *sequence) int {
	if m.steps > 0 && s.freshStep == m.steps+1 {
		return min(s.fresh, len(s.tokens))
	}
	return len(s.tokens)
}
