package hybrid

import (
	"fmt"

	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/internal/orderheap"
)

// With an evict.OrderedPreemption policy (fcfs, priority, progress) the Manager keeps its
// running sequences in a binary min-heap in the policy's order (ties by smallest ID), the
// one blocktable.Manager keeps (internal/orderheap), so that Preempt walks victims from
// the front and plans the release of those alone: its cost is what the victims hold (plus
// O(k log k) for k victims), not what every running sequence holds. Admit and Fork push,
// drop removes, and with a policy that reads progress Append and Extend re-place the
// sequence; each is O(log n) and allocates nothing once the heap has grown. Without an
// ordered policy order is a plain list of the running sequences (pos their place in it,
// removal swaps the last one in), so that Preempt describes them without walking the
// map of sequences.

// key is the sequence as the ordered policy sees it (the fields candidate fills that an
// ordered policy may read), refreshed in place: a pointer passed through the policy's
// interface escapes, so a local would be allocated at every comparison.
func (s *seq) key() *evict.Candidate {
	s.info = evict.Candidate{ID: uint64(s.id), Priority: s.priority, Arrival: s.arrival,
		Computed: s.computed, Output: max(0, len(s.tokens)-s.promptLen)}
	return &s.info
}

// seqOrder is the heap's view of the Manager's sequences (orderheap.Ops).
type seqOrder struct{ m *Manager }

// Before is the heap's strict total order: the policy's, then smallest ID.
func (o seqOrder) Before(a, b *seq) bool {
	if c := o.m.ordered.Compare(a.key(), b.key()); c != 0 {
		return c < 0
	}
	return a.id < b.id
}

func (seqOrder) SetPos(s *seq, i int32) { s.pos = i }

// orderPush adds a sequence that starts running (s.id set).
func (m *Manager) orderPush(s *seq) {
	m.order = orderheap.Push(m.order, seqOrder{m}, m.ordered != nil, s)
}

// orderRemove takes out a sequence that stops running (a no-op for one not in the heap).
func (m *Manager) orderRemove(s *seq) {
	m.order = orderheap.Remove(m.order, seqOrder{m}, m.ordered != nil, s, s.pos)
}

// orderFix re-places a running sequence whose tokens changed, when the order reads them.
func (m *Manager) orderFix(s *seq) {
	if m.progressOrder {
		orderheap.Fix(m.order, seqOrder{m}, s, s.pos)
	}
}

// orderNext returns the running sequences in the heap's order, one per call, without
// changing the heap; false once every one was returned. Start a walk by setting
// m.frontier to the root, position 0.
func (m *Manager) orderNext() (*seq, bool) {
	s, f, ok := orderheap.Next(m.order, seqOrder{m}, m.frontier)
	m.frontier = f
	return s, ok
}

// checkOrder is CheckInvariants' part for the heap (or list): it holds every running
// sequence once, at its recorded position, and with an ordered policy every parent before
// its children.
func (m *Manager) checkOrder() error {
	if len(m.order) != len(m.seqs) {
		return fmt.Errorf("hybrid: preemption order holds %d sequences, %d running", len(m.order), len(m.seqs))
	}
	for i, s := range m.order {
		if m.seqs[s.id] != s || int(s.pos) != i {
			return fmt.Errorf("hybrid: sequence %d at %d of the preemption order records %d", s.id, i, s.pos)
		}
		if i > 0 && m.ordered != nil && (seqOrder{m}).Before(s, m.order[(i-1)/2]) {
			return fmt.Errorf("hybrid: sequence %d comes before its parent in the preemption order", s.id)
		}
	}
	return nil
}
