package hybrid

import (
	"math"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/internal/invariant"
)

// CopyOp is one block copy the server executes on the device before the step that writes
// into Dst: the private copy of a block shared by a fork, made on the first write into it.
// Group says whose layers the block belongs to (a group's page is its own size and layout).
type CopyOp struct {
	Group    int
	Src, Dst blocks.ID
}

// Fork makes child a copy of the running sequence parent that shares every block holding
// its tokens, in every group (parallel sampling, beam search): one more reference each, no
// block allocated. Blocks the parent reserved past its last token (Reserve) stay its own.
// The first write by either into a shared, partly filled block copies it (TakeCopies), as
// blocktable.Manager's Fork; full blocks are never written again and stay shared. The child
// is a new arrival for preemption, with the parent's priority. It fails with ErrUnknownSeq
// for a missing parent, ErrDuplicateSeq for an existing child, and changes nothing.
func (m *Manager) Fork(parent, child blocktable.SeqID) error {
	p, ok := m.lookup(parent)
	if !ok {
		return m.missing("fork", parent)
	}
	if _, dup := m.seqs[child]; dup {
		return seqErr("fork", child, errDup)
	}
	if _, dup := m.swapped[child]; dup {
		return seqErr("fork", child, errDup)
	}
	if p.loading != 0 {
		return seqErr("fork", parent, errInvalid) // its loaded blocks are not cached yet
	}
	for g := range m.specs {
		for _, b := range p.tables[g][:m.ceil(g, p.computed)] {
			if b != blocks.NullID && m.st.ref(b) == math.MaxInt32 {
				return seqErr("fork", parent, blocks.ErrRefCountOverflow)
			}
		}
	}
	c := m.newSeq(&Request{Prompt: p.tokens, MaxTokens: p.maxTokens, Namespace: p.ns, Priority: p.priority})
	c.root = p.root
	c.path = append(c.path, p.path...)
	c.pinned = p.pinned
	m.st.pin(c.pinned)
	for g := range m.specs {
		t := p.tables[g][:m.ceil(g, p.computed)]
		m.taking(c, g, t)
		for _, b := range t {
			if b != blocks.NullID {
				m.st.take(b) // held by the parent: no queue change
			}
		}
		c.tables[g] = append(c.tables[g], t...)
		c.numCached[g] = p.numCached[g]
		c.lastState[g] = p.lastState[g]
		if p.computed%m.bs[g] != 0 {
			p.resEnd = 0 // its reserved slots began in the block now shared
		}
	}
	c.computed, c.extent = p.computed, p.computed
	p.forked, c.forked = true, true
	c.hit, c.promptLen = p.hit, p.promptLen
	m.clock++
	c.arrival = m.clock
	m.setQuiet(p)
	m.setQuiet(c)
	m.seqs[child] = c
	c.id = child
	m.orderPush(c)
	m.counters.Forks++
	if invariant.Enabled {
		invariant.Check(m.CheckInvariants)
	}
	return nil
}

// sharedWrite reports whether the next write of s into group g lands in a partly filled
// block another sequence holds too (after a Fork), and which entry it is.
func (m *Manager) sharedWrite(s *seq, g int) (int, bool) {
	if !s.forked {
		return 0, false // the usual decode step, kept inlined: it runs every step
	}
	return m.forkedWrite(s, g)
}

// forkedWrite is sharedWrite for a sequence that took part in a fork.
func (m *Manager) forkedWrite(s *seq, g int) (int, bool) {
	i := m.div(g, s.computed)
	t := s.tables[g]
	if i*m.bs[g] == s.computed || i >= len(t) || t[i] == blocks.NullID || m.st.ref(t[i]) < 2 {
		return i, false
	}
	return i, true
}

// TakeCopies appends to dst the copy-on-write operations made since the last call (by
// Append, Extend and Reserve on forked sequences), in the order they were made, and
// forgets them: the copies the server executes before the step, as vLLM v0's
// blocks_to_copy. Call it once a step, after the step's appends. Copies into blocks that a
// Finish or Preempt released meanwhile are dropped.
func (m *Manager) TakeCopies(dst []CopyOp) []CopyOp {
	dst = append(dst, m.copies...)
	m.copies = m.copies[:0]
	return dst
}

// dropStaleCopies forgets pending copies into blocks nobody holds any more.
func (m *Manager) dropStaleCopies() {
	k := 0
	for _, c := range m.copies {
		if m.st.ref(c.Dst) > 0 {
			m.copies[k] = c
			k++
		}
	}
	m.copies = m.copies[:k]
}

// Reserve gives sequence id private slots for n tokens past its computed ones in every
// group (the draft tokens of a speculative step, vLLM's num_lookahead_tokens), copying a
// shared block they begin in, without caching anything: FillSlots hands them out, and
// the tokens Append adds later use them. Each group first releases what it no longer
// needs, as Append does. A sequence still in a chunked prefill must Extend first. On
// error (out of blocks, past MaxTokens) nothing changes.
func (m *Manager) Reserve(id blocktable.SeqID, n int) error {
	s, ok := m.lookup(id)
	if !ok {
		return m.missing("reserve", id)
	}
	if n < 0 || n > s.maxTokens-s.computed || s.computed != len(s.tokens) {
		return seqErr("reserve", id, errInvalid)
	}
	if n == 0 {
		return nil
	}
	if err := m.schedule(id, s, s.computed+n, s.computed); err != nil {
		return err
	}
	s.resEnd = max(s.resEnd, s.computed+n)
	m.setQuiet(s)
	if invariant.Enabled {
		invariant.Check(m.CheckInvariants)
	}
	return nil
}

// Reserved returns how many private slots past its computed tokens sequence id has for
// FillSlots (0 after a Fork shared the block they began in, until Reserve again).
func (m *Manager) Reserved(id blocktable.SeqID) (int, error) {
	s, ok := m.lookup(id)
	if !ok {
		return 0, m.missing("reserved", id)
	}
	return max(0, s.resEnd-s.computed), nil
}

// FillSlots writes into dst the slots of group g for sequence id's positions [from,
// computed) followed by its first lookahead reserved slots (0 <= lookahead <= Reserved):
// one group's slot mapping of a step, as vLLM's slot_mapping per KV-cache group. The rest
// of dst is padded with -1 and the count written is returned. Positions the group no
// longer holds (left a window, the null block) are refused with ErrInvalidArgument;
// ErrShortBuffer when dst is too short. It writes nothing on error and allocates nothing.
func (m *Manager) FillSlots(id blocktable.SeqID, g, from, lookahead int, dst []int64) (int, error) {
	s, ok := m.lookup(id)
	if !ok {
		return 0, m.missing("fill slots", id)
	}
	if g < 0 || g >= m.ng || from < 0 || from > s.computed || lookahead < 0 || lookahead > max(0, s.resEnd-s.computed) ||
		lookahead > 0 && m.align[g] { // align mode reserves no lookahead state, as vLLM's
		return 0, seqErr("fill slots", id, errInvalid)
	}
	end := s.computed + lookahead
	n := end - from
	t, bs := s.tables[g], m.bs[g]
	for b := m.div(g, from); n > 0 && b <= m.div(g, end-1); b++ {
		if t[b] == blocks.NullID { // out of the window, or between Mamba align states
			return 0, seqErr("fill slots", id, errInvalid)
		}
	}
	if n > len(dst) {
		return 0, seqErr("fill slots", id, blocktable.ErrShortBuffer)
	}
	for i := range n {
		pos := from + i
		b := m.div(g, pos)
		dst[i] = int64(t[b])*int64(bs) + int64(pos-b*bs)
	}
	for i := n; i < len(dst); i++ {
		dst[i] = -1
	}
	return n, nil
}
