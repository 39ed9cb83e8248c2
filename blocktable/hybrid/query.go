package hybrid

import (
	"slices"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
)

// SeqInfo describes one sequence, running or swapped out, from Manager.Seq. A swapped-out
// sequence holds no device block: its Computed, Reserved and Held are 0, and its Tokens,
// HitTokens, Priority and Arrival are what they were when it was swapped out, as
// blocktable.Manager's SeqInfo has them.
type SeqInfo struct {
	State     blocktable.SeqState // blocktable.Running or blocktable.Swapped
	Tokens    int                 // its length, prompt tokens of a pending chunked prefill included
	Computed  int                 // tokens with slots
	Reserved  int                 // private lookahead slots past Computed (Reserve)
	Held      int                 // blocks its tables hold over every group (null entries excluded)
	HitTokens int                 // the prefix hit at admission
	Priority  int
	Arrival   uint64 // logical arrival: one tick per Admit and Fork
}

// Contains reports whether sequence id is known: running or swapped out (Swapped tells
// which), as blocktable.Manager's Contains.
func (m *Manager) Contains(id blocktable.SeqID) bool {
	if _, ok := m.seqs[id]; ok {
		return true
	}
	_, ok := m.swapped[id]
	return ok
}

// Seq describes sequence id, running or swapped out, as blocktable.Manager's Seq does. It
// fails with blocktable.ErrUnknownSeq (in a *blocktable.SeqError) for an ID the Manager
// does not know: never admitted, finished, or preempted in Recompute mode.
func (m *Manager) Seq(id blocktable.SeqID) (SeqInfo, error) {
	s, ok := m.lookup(id)
	if !ok {
		if rec, out := m.swapped[id]; out {
			return SeqInfo{State: blocktable.Swapped, Tokens: len(rec.tokens), HitTokens: rec.hit,
				Priority: rec.priority, Arrival: rec.arrival}, nil
		}
		return SeqInfo{}, seqErr("seq", id, errUnknown)
	}
	held := 0
	for _, t := range s.tables {
		for _, b := range t {
			if b != blocks.NullID {
				held++
			}
		}
	}
	return SeqInfo{State: blocktable.Running, Tokens: len(s.tokens), Computed: s.computed, Reserved: max(0, s.resEnd-s.computed),
		Held: held, HitTokens: s.hit, Priority: s.priority, Arrival: s.arrival}, nil
}

// Seqs appends the IDs of every known sequence (running or swapped out) to dst, in
// arrival order, as blocktable.Manager's Seqs; a swapped-out sequence keeps the arrival it
// had when it was swapped out.
func (m *Manager) Seqs(dst []blocktable.SeqID) []blocktable.SeqID {
	start := len(dst)
	for id := range m.seqs {
		dst = append(dst, id)
	}
	for id := range m.swapped {
		dst = append(dst, id)
	}
	slices.SortFunc(dst[start:], func(a, b blocktable.SeqID) int {
		x, y := m.arrivalOf(a), m.arrivalOf(b)
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

// arrivalOf is the arrival of the known sequence id, running or swapped out.
func (m *Manager) arrivalOf(id blocktable.SeqID) uint64 {
	if s, ok := m.seqs[id]; ok {
		return s.arrival
	}
	return m.swapped[id].arrival
}

// Tokens returns sequence id's tokens, running or swapped out (what a recompute-mode
// readmission passes as its prompt), as blocktable.Manager's Tokens; ErrUnknownSeq for an
// ID the Manager does not know. The slice is the Manager's own, not a copy, valid until
// the next call that changes the Manager: read it, do not write to it and do not keep
// it. It is clipped to its length, so that an append to it copies. AppendTokens gives a
// copy to change or keep.
func (m *Manager) Tokens(id blocktable.SeqID) ([]int32, error) {
	t, ok := m.tokensOf(id)
	if !ok {
		return nil, seqErr("tokens", id, errUnknown)
	}
	return t[:len(t):len(t)], nil
}

// AppendTokens appends sequence id's tokens, running or swapped out, to dst and returns
// the extended slice, as blocktable.Manager's AppendTokens: a copy, the caller's to
// change or keep; a dst with room allocates nothing. For an unknown ID it returns dst and
// ErrUnknownSeq.
func (m *Manager) AppendTokens(dst []int32, id blocktable.SeqID) ([]int32, error) {
	t, ok := m.tokensOf(id)
	if !ok {
		return dst, seqErr("tokens", id, errUnknown)
	}
	return append(dst, t...), nil
}

// tokensOf is the Manager's own slice of id's tokens, running or swapped out.
func (m *Manager) tokensOf(id blocktable.SeqID) ([]int32, bool) {
	if s, ok := m.lookup(id); ok {
		return s.tokens, true
	}
	if rec, out := m.swapped[id]; out {
		return rec.tokens, true
	}
	return nil, false
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
