package hybrid

import (
	"fmt"

	"github.com/kvpage/kvpage/evict"
)

// With an evict.OrderedPreemption policy (fcfs, priority, progress) the Manager keeps its
// running sequences in a binary min-heap in the policy's order (ties by smallest ID), as
// blocktable.Manager does (blocktable/order.go), so that Preempt walks victims from the
// front and plans the release of those alone: its cost is what the victims hold (plus
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

// before is the heap's strict total order: the policy's, then smallest ID.
func (m *Manager) before(a, b *seq) bool {
	if c := m.ordered.Compare(a.key(), b.key()); c != 0 {
		return c < 0
	}
	return a.id < b.id
}

func (m *Manager) orderSet(i int, s *seq) {
	m.order[i] = s
	s.pos = int32(i)
}

func (m *Manager) orderUp(i int) {
	s := m.order[i]
	for i > 0 {
		p := (i - 1) / 2
		if !m.before(s, m.order[p]) {
			break
		}
		m.orderSet(i, m.order[p])
		i = p
	}
	m.orderSet(i, s)
}

func (m *Manager) orderDown(i int) {
	s, n := m.order[i], len(m.order)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && m.before(m.order[c+1], m.order[c]) {
			c++
		}
		if !m.before(m.order[c], s) {
			break
		}
		m.orderSet(i, m.order[c])
		i = c
	}
	m.orderSet(i, s)
}

// orderPush adds a sequence that starts running (s.id set).
func (m *Manager) orderPush(s *seq) {
	s.pos = int32(len(m.order))
	m.order = append(m.order, s)
	if m.ordered != nil {
		m.orderUp(len(m.order) - 1)
	}
}

// orderRemove takes out a sequence that stops running (a no-op for one not in the heap).
func (m *Manager) orderRemove(s *seq) {
	if s.pos < 0 {
		return
	}
	i, last := int(s.pos), len(m.order)-1
	s.pos = -1
	if i != last {
		m.orderSet(i, m.order[last])
	}
	m.order[last] = nil
	m.order = m.order[:last]
	if i != last && m.ordered != nil {
		m.orderDown(i)
		m.orderUp(int(m.order[i].pos))
	}
}

// orderFix re-places a running sequence whose tokens changed, when the order reads them.
func (m *Manager) orderFix(s *seq) {
	if !m.progressOrder || s.pos < 0 {
		return
	}
	i := int(s.pos)
	m.orderDown(i)
	if int(s.pos) == i {
		m.orderUp(i)
	}
}

// orderNext returns the running sequences in the heap's order, one per call, without
// changing the heap: a frontier heap of positions holds the children of those returned so
// far (O(log k) a call for the k-th). It returns false once every sequence was returned.
// Start a walk by setting m.frontier to the root, position 0.
func (m *Manager) orderNext() (*seq, bool) {
	f := m.frontier
	if len(f) == 0 {
		return nil, false
	}
	top := f[0]
	last := len(f) - 1
	f[0] = f[last]
	f = f[:last]
	m.frontierDown(f, 0)
	for _, c := range [2]int32{2*top + 1, 2*top + 2} {
		if int(c) < len(m.order) {
			f = append(f, c)
			m.frontierUp(f, len(f)-1)
		}
	}
	m.frontier = f
	return m.order[top], true
}

func (m *Manager) frontierUp(f []int32, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !m.before(m.order[f[i]], m.order[f[p]]) {
			return
		}
		f[i], f[p] = f[p], f[i]
		i = p
	}
}

func (m *Manager) frontierDown(f []int32, i int) {
	n := len(f)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && m.before(m.order[f[c+1]], m.order[f[c]]) {
			c++
		}
		if !m.before(m.order[f[c]], m.order[f[i]]) {
			return
		}
		f[i], f[c] = f[c], f[i]
		i = c
	}
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
		if i > 0 && m.ordered != nil && m.before(s, m.order[(i-1)/2]) {
			return fmt.Errorf("hybrid: sequence %d comes before its parent in the preemption order", s.id)
		}
	}
	return nil
}
