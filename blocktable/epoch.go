package blocktable

import "github.com/kvpage/kvpage/prefix"

// BumpEpoch starts a new weight epoch for namespace ns after a weight update (see
// prefix.Index.BumpEpoch): its cached blocks are unreachable at once and evicted lazily,
// and the sequences of ns running or swapped now, whose KV was computed with the old
// weights, commit nothing more (their blocks go back to the pool when they end). It works
// whatever is held: nothing waits for the cache to be idle. It returns the new epoch, or
// 0 without an index. It is O(sequences).
func (m *Manager) BumpEpoch(ns prefix.Namespace) uint32 {
	if m.index == nil {
		return 0
	}
	for _, s := range m.seqs {
		if s.prompt.Namespace == ns {
			s.stale = true
		}
	}
	return m.index.BumpEpoch(ns)
}
