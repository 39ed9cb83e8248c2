package blocktable

import (
	"slices"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
)

// EvictBlocks drops the cached blocks of ids from the prefix index, and every cached
// block below one of them (prefix.Index.EvictBlocks, vLLM's BlockPool.evict_blocks), and
// returns how many blocks left the cache. It is what a server calls for the blocks a step
// committed when that step's forward pass did not run, or a KV connector failed to load
// them, or their KV was rejected: Admit and Append commit full blocks before the pass,
// as vLLM's allocate_slots caches them, so that requests of the same step can share
// them. No later admission hits a dropped block. A block a sequence holds stays in its
// table, no longer cached; a free one goes back to the pool.
//
// A running sequence whose table holds a dropped block commits nothing more, as after
// BumpEpoch: its KV past that block was computed from KV that is not valid, and caching
// it would let later requests hit it. The server fails the sequence (vLLM's "fail"
// policy, FINISHED_ERROR) or finishes it and admits it again to recompute. Swapped
// sequences hold no device blocks and are unaffected. Blocks of ids that are not cached
// (the null block, a free one, a sequence's own uncommitted block) are ignored.
//
// All or nothing: an ID outside the pool fails with a *prefix.BlockError wrapping
// ErrInvalidArgument, and an index with lower tiers refuses while a copy to or from them
// is in flight (prefix.ErrTransfersPending; call it once the step's transfers are
// confirmed); either changes nothing. Without an index nothing is cached and it returns 0
// once the IDs are checked. It costs O(pool blocks + table entries) and is for failures,
// not a hot path.
func (m *Manager) EvictBlocks(ids []blocks.ID) (int, error) {
	if m.index == nil {
		for _, id := range ids {
			if uint(id) >= uint(m.pool.NumBlocks()) {
				return 0, &prefix.BlockError{Op: "evict", ID: id, Err: ErrInvalidArgument}
			}
		}
		return 0, nil
	}
	dropped, err := m.index.EvictBlocks(m.hits[:0], ids)
	m.hits = dropped[:0]
	if err != nil || len(dropped) == 0 {
		return 0, err
	}
	slices.Sort(dropped)
	for _, s := range m.seqs {
		if s.state != Running || s.stale {
			continue
		}
		for _, b := range s.t.ids[s.t.nulls:] {
			if _, found := slices.BinarySearch(dropped, b); found {
				s.stale = true
				break
			}
		}
	}
	m.check()
	return len(dropped), nil
}
