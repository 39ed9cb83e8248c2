package hybrid

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
)

// Freeable without a walk, for the policies that rank by it (cost, and users' policies):
// Preempt describes every running sequence to them, and planning each one's release was a
// pass over every block every sequence holds (O(blocks) a call).
//
// In the hybrid Manager a block's reference count is the number of sequences holding it
// (the prefix tree holds none; every unreferenced block is in the free queue, cached or
// not), plus one for each copy to or from a lower tier in flight (TransferRefs), and a
// sequence holds a block at most once. So preempting s alone frees exactly the blocks s
// holds that no other sequence and no copy holds, and with no copy in flight that number
// changes only when some sequence takes or drops a reference, at the moments the number
// of sequences holding a block (seqRefs) goes between 0, 1 and 2. The
// Manager keeps it per sequence and group, exact, by noting every reference a sequence
// gains or drops (hold, taking, dropping: every call of the store that changes a count),
// and finds who still holds a block when its count falls to 1 from one word per block: the
// XOR of its holders' slot numbers (seq.slot), which is the last holder's own slot once
// the others are gone. Each note is O(1), and only the count's edges touch another
// sequence's record, so keeping it costs a few loads a block allocated or released, and
// Freeable is O(groups); Preempt with such a policy costs O(n log n) in the running
// sequences (sorting them by ID) plus what the victims hold.
//
// The premise (counts are sequences' holds and copies', nothing else) is the Manager's
// own: CheckInvariants checks every count against the tables and the copies, and the kept
// figures against the tables and (with no copy in flight) a plan of each sequence's
// release. A copy's reference comes and goes without a sequence's note, so while any copy
// is in flight Freeable is planned per candidate, as before (kept); the kept figures, which
// count sequences only, stay right through it. Whoever adds another kind of reference must
// note it here too.
//
// Ordered policies (fcfs, priority, progress) never read Freeable, so the Manager keeps
// nothing for them: their hot paths pay one predictable branch per note.
type freeAcct struct {
	on    bool
	owner []uint32 // per block: XOR of its holders' slots
	sole  []int32  // per (slot, group): blocks the slot's sequence alone holds
	held  []int32  // per slot: blocks (not the null block) its tables hold
	slots uint32   // slots handed out; slot 0 is unused
	// free are slots of records the spare list dropped, for the next records made: the
	// rows above stay sized for the most records ever kept, 4 x (groups + 1) bytes each,
	// where without reuse they would grow with every record made.
	free []uint32
}

// initFreeable turns the accounting on when the policy is not ordered.
func (m *Manager) initFreeable(numBlocks int) {
	if m.ordered != nil {
		return
	}
	m.fa.on = true
	m.fa.owner = make([]uint32, numBlocks)
	m.fa.sole = make([]int32, m.ng) // slot 0's row, unused
	m.fa.held = make([]int32, 1)
}

// newSlot gives a new sequence record its slot (records are reused, slots with them,
// and a dropped record's slot is reused by the next record made).
func (m *Manager) newSlot() uint32 {
	if n := len(m.fa.free); n > 0 {
		slot := m.fa.free[n-1]
		m.fa.free = m.fa.free[:n-1]
		return slot
	}
	m.fa.slots++
	if m.fa.on {
		m.fa.sole = append(m.fa.sole, make([]int32, m.ng)...)
		m.fa.held = append(m.fa.held, 0)
	}
	return m.fa.slots
}

// freeSlot takes back the slot of a record the spare list dropped: it holds nothing
// (CheckInvariants checks every spare record), so its rows are zero already.
func (m *Manager) freeSlot(slot uint32) { m.fa.free = append(m.fa.free, slot) }

// hold notes that s holds b in group g, a block just allocated (count 1).
func (m *Manager) hold(s *seq, g int, b blocks.ID) {
	if m.fa.on {
		m.holdFresh(s, g, b)
	}
}

func (m *Manager) holdFresh(s *seq, g int, b blocks.ID) {
	a := &m.fa
	a.owner[b] = s.slot
	a.sole[int(s.slot)*m.ng+g]++
	a.held[s.slot]++
}

// holdAll is hold for each block of ids, all just allocated.
func (m *Manager) holdAll(s *seq, g int, ids []blocks.ID) {
	if m.fa.on {
		for _, b := range ids {
			m.holdFresh(s, g, b)
		}
	}
}

// taking notes, before the store takes them, that s takes a reference to each block of
// ids in group g (a hit or a fork; the null block is skipped).
func (m *Manager) taking(s *seq, g int, ids []blocks.ID) {
	if m.fa.on {
		m.takingSlow(s, g, ids)
	}
}

func (m *Manager) takingSlow(s *seq, g int, ids []blocks.ID) {
	a := &m.fa
	row := int(s.slot) * m.ng
	for _, b := range ids {
		if b == blocks.NullID {
			continue
		}
		switch m.seqRefs(b) {
		case 0:
			a.sole[row+g]++ // off the free queue (or held by a copy only): s alone holds it
		case 1:
			a.sole[int(a.owner[b])*m.ng+g]-- // its holder shares it from now on
		}
		a.owner[b] ^= s.slot
		a.held[s.slot]++
	}
}

// dropping notes, before the store releases them, that s drops its reference to each
// block of ids in group g (the null block is skipped).
func (m *Manager) dropping(s *seq, g int, ids []blocks.ID) {
	if m.fa.on {
		m.droppingSlow(s, g, ids)
	}
}

func (m *Manager) droppingSlow(s *seq, g int, ids []blocks.ID) {
	for _, b := range ids {
		if b != blocks.NullID {
			m.dropOne(s, g, b)
		}
	}
}

// droppingOne is dropping for one block b (not the null block).
func (m *Manager) droppingOne(s *seq, g int, b blocks.ID) {
	if m.fa.on {
		m.dropOne(s, g, b)
	}
}

func (m *Manager) dropOne(s *seq, g int, b blocks.ID) {
	a := &m.fa
	a.owner[b] ^= s.slot
	switch m.seqRefs(b) {
	case 1:
		a.sole[int(s.slot)*m.ng+g]-- // s alone held it: it is freed
	case 2:
		a.sole[int(a.owner[b])*m.ng+g]++ // the one holder left now holds it alone
	}
	a.held[s.slot]--
}

// seqRefs is how many sequences hold b: its count less the copies in flight holding it.
func (m *Manager) seqRefs(b blocks.ID) int {
	r := m.st.ref(b)
	if m.st.tiers != nil {
		r -= m.st.t.TransferRefs(b)
	}
	return r
}

// kept reports whether Freeable and Held are read from the accounting now: with no copy
// in flight, whose reference would keep a block a sequence alone holds from coming free.
func (m *Manager) kept() bool {
	return m.fa.on && !m.planFreeable && (m.st.tiers == nil || m.st.t.PendingTransfers() == 0)
}

// soleCount is what preempting s alone frees, from the accounting.
func (m *Manager) soleCount(s *seq) int {
	n := 0
	for _, c := range m.fa.sole[int(s.slot)*m.ng:][:m.ng] {
		n += int(c)
	}
	return n
}

// checkFreeable is CheckInvariants' part for the accounting: every block's owner word is
// the XOR of its holders' slots, and each running sequence's figures are what its tables
// and a plan of its release say, per group.
func (m *Manager) checkFreeable() error {
	a := &m.fa
	if !a.on {
		return nil
	}
	defer func(v int) { m.pre.visited = v }(m.pre.visited) // the checks' plans are not Preempt's
	owner := make([]uint32, len(a.owner))
	for _, s := range m.seqs {
		for _, t := range s.tables {
			for _, b := range t {
				if b != blocks.NullID {
					owner[b] ^= s.slot
				}
			}
		}
	}
	for b, o := range owner {
		if a.owner[b] != o {
			return fmt.Errorf("block %d: holders' slots XOR to %d, kept %d", b, o, a.owner[b])
		}
	}
	for id, s := range m.seqs {
		held, sole := 0, 0
		for g, t := range s.tables {
			n := 0
			for _, b := range t {
				if b != blocks.NullID {
					held++
					if m.seqRefs(b) == 1 {
						n++
					}
				}
			}
			if k := a.sole[int(s.slot)*m.ng+g]; int(k) != n {
				return fmt.Errorf("seq %d group %d: holds %d blocks alone, kept %d", id, g, n, k)
			}
			sole += n
		}
		if int(a.held[s.slot]) != held {
			return fmt.Errorf("seq %d: holds %d blocks, kept %d", id, held, a.held[s.slot])
		}
		if m.st.tiers != nil && m.st.t.PendingTransfers() > 0 {
			continue // copies in flight hold blocks: the plan frees less, and Preempt plans
		}
		m.planBegin()
		if plan := m.planRelease(s); plan != sole {
			return fmt.Errorf("seq %d: its release frees %d blocks, Freeable kept %d", id, plan, sole)
		}
	}
	for _, s := range m.spare { // records not in use hold nothing
		if a.held[s.slot] != 0 || m.soleCount(s) != 0 {
			return fmt.Errorf("a spare sequence record keeps %d blocks held, %d alone", a.held[s.slot], m.soleCount(s))
		}
	}
	for _, slot := range a.free { // nor do the slots of records dropped
		row := a.sole[int(slot)*m.ng:][:m.ng]
		for _, c := range row {
			if c != 0 || a.held[slot] != 0 {
				return fmt.Errorf("free slot %d keeps %d blocks held, %v alone", slot, a.held[slot], row)
			}
		}
	}
	return nil
}

// checkSpare verifies the spare records' bound, and that every slot handed out is one
// record's, in use or spare, or free: none is lost, so the accounting's rows stay
// sized for the most records kept.
func (m *Manager) checkSpare() error {
	if n, most := len(m.spare), m.maxSpare(); n > most {
		return fmt.Errorf("%d spare sequence records for %d sequences (at most %d)", n, m.live(), most)
	}
	if n := len(m.seqs) + len(m.spare) + len(m.fa.free); uint32(n) != m.fa.slots {
		return fmt.Errorf("%d slots handed out, %d records and %d free slots", m.fa.slots, len(m.seqs)+len(m.spare), len(m.fa.free))
	}
	return nil
}
