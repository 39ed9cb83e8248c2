package blocktable

import "github.com/kvpage/kvpage/blocks"

// Freeable without a walk, for the policies that rank by it (cost, and users' policies).
//
// A sequence gains its blocks in two ways only: a hit, which takes a cached path from a
// namespace root, and blocks it allocates itself, which are private until it commits them
// under its cursor (at the end of a path it holds) or a Fork gives its whole table to
// another sequence; a pin (prefix.Index.Pin) also takes a path from a root. So every
// holder of a cached block also holds the block's ancestors, and whoever shares a table
// entry shares the entries before it: along a table, the number of holders besides the
// index never grows. Preempting the sequence then frees exactly the entries nobody else
// holds, a suffix of its table, and it holds no cached block's ancestor it does not hold
// itself, so its release unpins nothing past its own blocks. The suffix is found by binary
// search on the pool's refcounts: O(log blocks) a sequence instead of PlanRelease's pass
// over them, and Preempt with such a policy costs O(n log n) in the running sequences.
//
// The one way out is a duplicate: when a commit finds a block's content cached already, the
// cursor moves onto the index's copy, which the sequence does not hold; the blocks it
// commits next hang under that copy, whose other holders then free less than the count
// says (the copy stays pinned by them), and a release can unpin the copy too. A sequence
// that committed a block under a node it may not hold is "tangled" (and so are its forks);
// while any is, and under a sliding window (whose released entries are at the front of a
// table), Freeable is planned per candidate as before. So it is while a copy to or from a
// lower tier is in flight: the copy holds a pool reference on one block (and pins it)
// without its ancestors. CheckInvariants checks the count
// against the plan for every running sequence whenever the shortcut is in force.

// soleFreeable reports whether Freeable may be counted by soleHeld now.
func (m *Manager) soleFreeable() bool {
	return m.tangled == 0 && m.cfg.SlidingWindow == 0 && !m.walkFreeable &&
		(m.index == nil || m.index.PendingTransfers() == 0)
}

// soleHeld is how many of s's live blocks nobody else holds: the suffix of its table
// whose entries have no holder but s (and, if cached, the index's own reference).
func (m *Manager) soleHeld(s *sequence) int {
	live := s.t.ids[s.t.nulls:]
	if len(live) == 0 || !m.sharedBlock(live[0]) {
		return len(live) // nothing shared: the common case, one probe
	}
	lo, hi := 1, len(live)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if m.sharedBlock(live[mid]) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return len(live) - lo
}

// sharedBlock reports whether block b, held by one sequence, has any other holder than
// that sequence and the index's own reference.
func (m *Manager) sharedBlock(b blocks.ID) bool {
	r := m.pool.RefCount(b)
	if m.index != nil && m.index.IsCached(b) {
		r--
	}
	return r > 1
}

// committedUnder records what a commit of s's blocks found: after a duplicate the cursor
// may stand on a block s does not hold, and a block stored under it tangles s and every
// fork that shares it.
func (m *Manager) committedUnder(s *sequence, stored, duplicates, orphaned int) {
	if orphaned > 0 || (stored > 0 && (s.dup || duplicates > 0)) {
		m.tangle(s)
	}
	if duplicates > 0 || orphaned > 0 {
		s.dup = true
	}
}

// A tangled block is held by the sequence that committed it and by its forks, before or
// after the commit, and by no one else without its ancestors (anyone else takes it with a
// hit, a path from the root). So the mark belongs to the fork family: a sequence and every
// fork of it, transitively, which share a family record from the first Fork on (a lone
// sequence keeps the mark itself, so that admissions touch no record). Manager.tangled
// counts the tangled units, lone sequences and families with a live member.

// family is a fork family's record; Manager.fams[0] is unused, so that the zero fam of a
// sequence means "alone".
type family struct {
	members int32
	tangled bool
}

// tangle marks s's unit tangled.
func (m *Manager) tangle(s *sequence) {
	if s.fam != 0 {
		if f := &m.fams[s.fam]; !f.tangled {
			f.tangled = true
			m.tangled++
		}
	} else if !s.tangled {
		s.tangled = true
		m.tangled++
	}
}

// joinFamily makes the new fork c a member of p's family, creating the family on p's
// first fork with p's own mark.
func (m *Manager) joinFamily(p, c *sequence) {
	if p.fam == 0 {
		if len(m.fams) == 0 {
			m.fams = append(m.fams, family{})
		}
		if k := len(m.freeFams); k > 0 {
			p.fam = m.freeFams[k-1]
			m.freeFams = m.freeFams[:k-1]
		} else {
			p.fam = int32(len(m.fams))
			m.fams = append(m.fams, family{})
		}
		m.fams[p.fam] = family{members: 1, tangled: p.tangled}
		p.tangled = false // the unit's mark moved to the family: the count is unchanged
	}
	c.fam = p.fam
	m.fams[p.fam].members++
}

// leaveUnit takes s out of its unit (it stops holding device blocks, or holds only a
// fresh path again): a family loses a member, and its mark with its last one.
func (m *Manager) leaveUnit(s *sequence) {
	if s.fam != 0 {
		f := &m.fams[s.fam]
		if f.members--; f.members == 0 {
			if f.tangled {
				m.tangled--
			}
			*f = family{}
			m.freeFams = append(m.freeFams, s.fam)
		}
		s.fam = 0
	} else if s.tangled {
		m.tangled--
	}
	s.tangled = false
}
