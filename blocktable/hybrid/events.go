package hybrid

import "fmt"

// ResetPrefixCache drops every cached block of every group from the prefix index, as
// vLLM's reset_prefix_cache (after a weight update), and reports one AllBlocksCleared to
// Config.Observer. Like vLLM's, it refuses while a sequence is admitted (their blocks
// are in use and pinned in the index), with an error wrapping ErrInvalidArgument, and
// changes nothing. The free queue keeps its order; its blocks are merely uncached.
func (m *Manager) ResetPrefixCache() error {
	if len(m.seqs) > 0 {
		return fmt.Errorf("%w: reset the prefix cache with %d sequences admitted", errInvalid, len(m.seqs))
	}
	return m.st.t.Clear()
}
