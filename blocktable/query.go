package blocktable

import (
	"slices"

	"github.com/kvpage/kvpage/blocks"
)

// Contains reports whether seq is known (running or swapped).
func (m *Manager) Contains(seq SeqID) bool {
	_, ok := m.seqs[seq]
	return ok
}

// Seq describes seq.
func (m *Manager) Seq(seq SeqID) (SeqInfo, error) {
	s, err := m.lookup("seq", seq)
	if err != nil {
		return SeqInfo{}, err
	}
	return SeqInfo{
		State:     s.state,
		Tokens:    len(s.tokens),
		Reserved:  s.t.Reserved(),
		Blocks:    len(s.t.ids),
		HitTokens: s.hit,
		Committed: s.committed(),
		Priority:  s.priority,
		Arrival:   s.arrival,
	}, nil
}

// Seqs appends the IDs of every known sequence, in arrival order, to dst.
func (m *Manager) Seqs(dst []SeqID) []SeqID {
	start := len(dst)
	for id := range m.seqs {
		dst = append(dst, id)
	}
	slices.SortFunc(dst[start:], func(a, b SeqID) int {
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

// Tokens returns seq's token ids without a copy, for a scheduler's reads: the slice is
// the Manager's own, valid until the next call that changes the Manager, so read it, do
// not write to it (its tokens key the blocks still to be committed) and do not keep it.
// It is clipped to its length, so that an append to it copies rather than writing into
// the Manager's room.
// AppendTokens (like AppendInputs for the inputs) gives a copy to change or keep.
func (m *Manager) Tokens(seq SeqID) ([]int32, error) {
	s, err := m.lookup("tokens", seq)
	if err != nil {
		return nil, err
	}
	return s.tokens[:len(s.tokens):len(s.tokens)], nil
}

// AppendTokens appends seq's token ids to dst and returns the extended slice: a copy,
// the caller's to change or keep. A dst with room allocates nothing. For an unknown seq
// it returns dst and ErrUnknownSeq (in a *SeqError).
func (m *Manager) AppendTokens(dst []int32, seq SeqID) ([]int32, error) {
	s, err := m.lookup("tokens", seq)
	if err != nil {
		return dst, err
	}
	return append(dst, s.tokens...), nil
}

// Blocks returns the block table of the running sequence seq (null entries of a sliding
// window included) without a copy, as Tokens returns the tokens: the slice is the
// Manager's own, valid until the next call that changes the Manager, so read it, do not
// write to it (a write would redirect the sequence's KV) and do not keep it. It is
// clipped to its length, so that an append to it copies rather than writing into the
// room the table grows into. AppendBlocks gives a copy to change or keep: a KV
// connector that saves a finished sequence's blocks after Finish takes one first.
func (m *Manager) Blocks(seq SeqID) ([]blocks.ID, error) {
	s, err := m.running("blocks", seq)
	if err != nil {
		return nil, err
	}
	return s.t.Blocks(), nil
}

// AppendBlocks appends the block table of the running sequence seq (null entries of a
// sliding window included) to dst and returns the extended slice: a copy, the caller's
// to change or keep. A dst with room allocates nothing. For a sequence unknown or not
// running it returns dst and ErrUnknownSeq or ErrNotRunning (in a *SeqError).
func (m *Manager) AppendBlocks(dst []blocks.ID, seq SeqID) ([]blocks.ID, error) {
	s, err := m.running("blocks", seq)
	if err != nil {
		return dst, err
	}
	return append(dst, s.t.ids...), nil
}

// Slot returns the flat KV slot (block x BlockSize + offset) of token position pos of
// the running sequence seq: a token's, or one of its reserved lookahead slots (pos <
// Len + Reserved).
func (m *Manager) Slot(seq SeqID, pos int) (int64, error) {
	s, err := m.running("slot", seq)
	if err != nil {
		return -1, err
	}
	return s.t.Slot(pos)
}

// FillSlots writes into dst the flat slots of seq's positions [from, Len+lookahead): the
// slot mapping of a step, as vLLM's slot_mapping. Positions from..Len-1 hold the tokens
// appended (from is typically Len before the Append); then come the first lookahead of the
// slots the last Append reserved (0 <= lookahead <= SeqInfo.Reserved), for the draft tokens
// a speculative step writes. The rest of dst is padded with -1, and the count returned is
// only the positions written: never the empty tail of the last block. Every slot in it
// past the sequence's committed tokens lies in a block the sequence alone holds, so
// writing them cannot touch another sequence's KV. ErrShortBuffer when dst is too short,
// ErrInvalidArgument for a position or lookahead out of range, writing nothing. It
// allocates nothing.
func (m *Manager) FillSlots(seq SeqID, from, lookahead int, dst []int64) (int, error) {
	s, err := m.running("fill slots", seq)
	if err != nil {
		return 0, err
	}
	return s.t.FillSlots(from, lookahead, dst)
}

// FillRow writes seq's block table into dst (int32 block IDs, what paged-attention
// kernels read), pads the rest of dst with the null block (0) and returns the number of
// blocks. It fails with ErrShortBuffer, writing nothing, when dst is too short.
func (m *Manager) FillRow(seq SeqID, dst []int32) (int, error) {
	s, err := m.running("fill row", seq)
	if err != nil {
		return 0, err
	}
	return s.t.FillRow(dst)
}

// Pack packs the block tables of the running sequences seqs into b, one padded row each
// in the order of seqs (see Batch); PackTables is the same for standalone Tables. On
// error (a sequence unknown or not running, a table longer than b.MaxBlocks) b is
// unchanged.
func (m *Manager) Pack(b *Batch, seqs []SeqID) error {
	return b.pack(len(seqs), func(i int) ([]blocks.ID, error) {
		s, err := m.running("pack", seqs[i])
		if err != nil {
			return nil, err
		}
		return s.t.ids, nil
	})
}

// Stats returns a snapshot of the Manager's state and counters.
func (m *Manager) Stats() Stats {
	st := m.st
	ps := m.pool.Stats()
	st.Capacity, st.Free = ps.Capacity, ps.Free
	st.Evictions = ps.Reclaimed - m.reclaimBase
	for _, s := range m.seqs {
		if s.state == Running {
			st.Running++
		} else {
			st.Swapped++
			st.HostInUse += m.index.HeldBlocks(s.hold)
		}
	}
	if m.index != nil {
		is := m.index.Stats()
		st.Cached, st.Evictable = is.Cached, is.Reclaimable
	}
	st.InUse = ps.InUse - st.Evictable
	return st
}
