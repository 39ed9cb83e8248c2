package hybrid

import (
	"slices"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
)

// SeqInfo describes one running sequence, from Manager.Seq.
type SeqInfo struct {
	Tokens    int // its length, prompt tokens of a pending chunked prefill included
	Computed  int // tokens with slots
	Reserved  int // private lookahead slots past Computed (Reserve)
	Held      int // blocks its tables hold over every group (null entries excluded)
	HitTokens int // the prefix hit at admission
	Priority  int
	Arrival   uint64 // logical arrival: one tick per Admit and Fork
}

// Contains reports whether sequence id is running.
func (m *Manager) Contains(id blocktable.SeqID) bool {
	_, ok := m.seqs[id]
	return ok
}

// Seq describes sequence id.
func (m *Manager) Seq(id blocktable.SeqID) (SeqInfo, error) {
	s, ok := m.lookup(id)
	if !ok {
		return SeqInfo{}, m.missing("seq", id)
	}
	held := 0
	for _, t := range s.tables {
		for _, b := range t {
			if b != blocks.NullID {
				held++
			}
		}
	}
	return SeqInfo{Tokens: len(s.tokens), Computed: s.computed, Reserved: max(0, s.resEnd-s.computed),
		Held: held, HitTokens: s.hit, Priority: s.priority, Arrival: s.arrival}, nil
}

// Seqs appends the IDs of the running sequences to dst, in arrival order.
func (m *Manager) Seqs(dst []blocktable.SeqID) []blocktable.SeqID {
	start := len(dst)
	for id := range m.seqs {
		dst = append(dst, id)
	}
	slices.SortFunc(dst[start:], func(a, b blocktable.SeqID) int {
		x, y := m.seqs[a].arrival, m.seqs[b].arrival
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	return dst
}

// Tokens returns sequence id's tokens (what a recompute-mode readmission passes as its
// prompt). The slice is the Manager's: read it, do not keep it past the next call.
func (m *Manager) Tokens(id blocktable.SeqID) ([]int32, error) {
	s, ok := m.lookup(id)
	if !ok {
		return nil, m.missing("tokens", id)
	}
	return s.tokens, nil
}

// BlockState says where a block is, from Manager.Block.
type BlockState struct {
	// Refs is the number of table entries holding it; 0 means it is in the free queue.
	Refs int
	// Cached is set when the block is in the prefix index, for group Group (0 when not
	// cached).
	Cached bool
	Group  int
	// Transfers is how many of Refs are copies to or from a lower tier in flight.
	Transfers int
}

// Block returns the state of block b (the zero BlockState for the null block or an ID
// outside the pool): what a test kit needs to tell a leak from a cached block.
func (m *Manager) Block(b blocks.ID) BlockState {
	refs, tr := m.st.ref(b), m.st.t.TransferRefs(b)
	e, cached := m.st.t.Entry(b)
	if !cached {
		return BlockState{Refs: refs, Transfers: tr}
	}
	return BlockState{Refs: refs, Cached: true, Group: e.Group, Transfers: tr}
}

// NumBlocks is the pool's size, the null block included.
func (m *Manager) NumBlocks() int { return m.st.q.NumBlocks() }
