package blocktable

import (
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/internal/orderheap"
)

// With an evict.OrderedPreemption policy the Manager keeps its running sequences in a
// binary min-heap in the policy's order (ties by smallest ID; internal/orderheap, shared
// with blocktable/hybrid), so that Preempt walks victims from the front and plans the
// release of those alone: its cost is what the victims hold (plus O(k log k) for k
// victims), not what every running sequence holds. Admit, Fork and Resume push, a
// sequence that stops running is removed, and with a policy that reads progress a
// sequence whose tokens change is re-placed; each is O(log n) and allocates nothing once
// the heap has grown. Without an ordered policy, order is just the running sequences in
// no order (a sequence's pos is its place), so that Preempt lists the candidates without
// iterating the map.

// key is the sequence as the ordered policy sees it, refreshed in place: it lives in the
// sequence record because a pointer passed through the policy's interface escapes, and a
// local would be allocated at every comparison.
func (s *sequence) key() *evict.Candidate {
	s.info = evict.Candidate{ID: uint64(s.id), Priority: s.priority, Arrival: s.arrival,
		Computed: len(s.tokens), Output: max(0, len(s.tokens)-s.promptLen)}
	return &s.info
}

// seqOrder is the heap's view of the Manager's sequences (orderheap.Ops).
type seqOrder struct{ m *Manager }

// Before is the heap's strict total order: the policy's, then smallest ID.
func (o seqOrder) Before(a, b *sequence) bool {
	if c := o.m.ordered.Compare(a.key(), b.key()); c != 0 {
		return c < 0
	}
	return a.id < b.id
}

func (seqOrder) SetPos(s *sequence, i int32) { s.pos = i }

// orderPush adds a sequence that starts running.
func (m *Manager) orderPush(s *sequence) {
	m.order = orderheap.Push(m.order, seqOrder{m}, m.ordered != nil, s)
}

// orderRemove takes out a sequence that stops running (a no-op for one not in the heap).
func (m *Manager) orderRemove(s *sequence) {
	m.order = orderheap.Remove(m.order, seqOrder{m}, m.ordered != nil, s, s.pos)
}

// orderFix re-places a running sequence whose tokens changed, when the order reads them.
func (m *Manager) orderFix(s *sequence) {
	if m.progressOrder {
		orderheap.Fix(m.order, seqOrder{m}, s, s.pos)
	}
}

// orderNext returns the running sequences in the heap's order, one per call, without
// changing the heap; false once every one was returned. Start a walk by setting
// m.frontier to the root, position 0.
func (m *Manager) orderNext() (*sequence, bool) {
	s, f, ok := orderheap.Next(m.order, seqOrder{m}, m.frontier)
	m.frontier = f
	return s, ok
}
