package blocktable

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
)

// CheckInvariants verifies manager, tables, index and pool together: every block's
// refcount equals its number of holders (table entries of running sequences plus the
// index's reference on cached blocks), no table points at a free block, every swapped
// sequence holds exactly its host blocks, and each part's own invariants hold. It costs
// O(blocks + tokens) and allocates: it is for tests and the kvinvariants build tag.
func (m *Manager) CheckInvariants() error {
	if err := m.pool.CheckInvariants(); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	if m.index != nil {
		if err := m.index.CheckInvariants(); err != nil {
			return fmt.Errorf("index: %w", err)
		}
	}
	holders := make([]int32, m.pool.NumBlocks())
	for id, s := range m.seqs {
		if s.id != id {
			return fmt.Errorf("seq %d is filed under %d", s.id, id)
		}
		if s.plain != isPlain(&s.prompt) {
			return fmt.Errorf("seq %d is marked plain=%v for a prompt whose plainness is %v", id, s.plain, !s.plain)
		}
		if s.state == Swapped {
			// Swapped out into the tiers (tiers.go): its tokens and its hold only, no table,
			// no cursor.
			if len(s.t.ids) != 0 || s.t.tokens != 0 || s.t.room != 0 || s.committed() != 0 {
				return fmt.Errorf("seq %d, swapped into the tiers, holds a table", id)
			}
			continue
		}
		if s.hold != 0 {
			return fmt.Errorf("running seq %d keeps a hold on the lower tiers", id)
		}
		if len(s.tokens) != s.t.tokens {
			return fmt.Errorf("seq %d has %d tokens but its table %d", id, len(s.tokens), s.t.tokens)
		}
		if s.t.bs != m.bs || s.t.window != m.cfg.SlidingWindow || s.t.pool != m.pool {
			return fmt.Errorf("seq %d: table configured unlike the manager", id)
		}
		if c := s.committed(); c > len(s.tokens)/m.bs || (!m.caching() && c != 0) {
			return fmt.Errorf("seq %d has %d committed blocks for %d tokens", id, c, len(s.tokens))
		}
		switch s.state {
		case Running:
			if err := s.t.CheckInvariants(); err != nil {
				return fmt.Errorf("seq %d: %w", id, err)
			}
			// The decode step (Manager.step) commits only a block it fills: with room
			// left in the last block, every full block before it is committed already.
			if c := s.committed(); s.t.room > 0 && m.caching() && !s.stale && s.loading == 0 && c != len(s.tokens)/m.bs {
				return fmt.Errorf("seq %d has room in its last block but %d of its %d full blocks committed", id, c, len(s.tokens)/m.bs)
			}
			for _, b := range s.t.ids[s.t.nulls:] {
				holders[b]++
			}
		default:
			return fmt.Errorf("seq %d in unknown state %d", id, s.state)
		}
	}
	for i, h := range holders {
		id := blocks.ID(i)
		if m.pool.HasNullBlock() && id == blocks.NullID {
			if h != 0 {
				return fmt.Errorf("%d table entries outside a sliding window name the null block", h)
			}
			continue
		}
		want := int(h)
		if m.index != nil && m.index.IsCached(id) {
			want++ // the index's reference
		}
		if m.index != nil {
			want += m.index.Pins(id) // one per pin, cached or dropped by EvictBlocks
		}
		if m.index != nil {
			want += m.index.TransferRefs(id) // copies to or from a lower tier in flight
		}
		if got := m.pool.RefCount(id); got != want {
			return fmt.Errorf("block %d has refcount %d but %d holders (%s)", id, got, want, m.holderNames(id))
		}
	}
	if err := m.checkOrder(); err != nil {
		return err
	}
	if err := m.checkSoleHeld(); err != nil {
		return err
	}
	if n, most := len(m.spare), m.maxSpare(); n > most {
		return fmt.Errorf("%d spare sequence records for %d sequences (at most %d)", n, len(m.seqs), most)
	}
	for i, s := range m.near {
		if s != nil && (m.seqs[s.id] != s || uint64(s.id)&uint64(len(m.near)-1) != uint64(i)) {
			return fmt.Errorf("near-cache slot %d names seq %d, which is not filed there", i, s.id)
		}
	}
	return nil
}

// holderNames lists the running sequences whose tables hold id, for error messages.
func (m *Manager) holderNames(id blocks.ID) string {
	out := ""
	for sid, s := range m.seqs {
		if s.state != Running {
			continue
		}
		for _, b := range s.t.ids[s.t.nulls:] {
			if b == id {
				out += fmt.Sprintf("seq %d ", sid)
			}
		}
	}
	if m.index != nil && m.index.IsCached(id) {
		out += "index"
	}
	if out == "" {
		return "none"
	}
	return out
}

// checkOrder verifies the running sequences' list: it holds exactly them, each at its
// recorded position, and with an ordered policy it is a heap, every parent before its
// children.
func (m *Manager) checkOrder() error {
	running := 0
	for _, s := range m.seqs {
		if s.state == Running {
			running++
		} else if s.pos >= 0 {
			return fmt.Errorf("seq %d is not running but in the preemption order", s.id)
		}
	}
	if running != len(m.order) {
		return fmt.Errorf("%d running sequences, %d in the preemption order", running, len(m.order))
	}
	for i, s := range m.order {
		if s == nil || int(s.pos) != i || m.seqs[s.id] != s {
			return fmt.Errorf("preemption order position %d is stale", i)
		}
		if m.ordered != nil && i > 0 && (seqOrder{m}).Before(s, m.order[(i-1)/2]) {
			return fmt.Errorf("seq %d comes before its parent in the preemption order", s.id)
		}
	}
	return nil
}

// checkSoleHeld verifies the shortcut of freeable.go: the tangled count matches the
// marks, and while the shortcut is in force every running sequence's Freeable counted by
// binary search is the one its release plan gives.
func (m *Manager) checkSoleHeld() error {
	tangled := 0
	members := make(map[int32]int32)
	for _, s := range m.seqs {
		if s.fam != 0 {
			members[s.fam]++
			if s.tangled {
				return fmt.Errorf("seq %d is marked tangled in family %d", s.id, s.fam)
			}
		} else if s.tangled {
			tangled++
		}
	}
	for f, n := range members {
		if int(f) >= len(m.fams) || m.fams[f].members != n {
			return fmt.Errorf("family %d has %d members, its record says otherwise", f, n)
		}
		if m.fams[f].tangled {
			tangled++
		}
	}
	if tangled != m.tangled {
		return fmt.Errorf("%d units marked tangled, the count says %d", tangled, m.tangled)
	}
	if !m.soleFreeable() {
		return nil
	}
	for id, s := range m.seqs {
		if s.state != Running {
			continue
		}
		if got, want := m.soleHeld(s), m.freeable(s); got != want {
			return fmt.Errorf("seq %d: Freeable by its table's unshared suffix is %d, its release plan frees %d", id, got, want)
		}
	}
	return nil
}
