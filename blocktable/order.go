package blocktable

import "github.com/kvpage/kvpage/evict"

// With an evict.OrderedPreemption policy the Manager keeps its running sequences in a
// binary min-heap in the policy's order (ties by smallest ID), so that Preempt walks
// victims from the front and plans the release of those alone: its cost is what the
// victims hold (plus O(k log k) for k victims), not what every running sequence holds.
// Admit, Fork and Resume push, a sequence that stops running is removed, and with a
// policy that reads progress a sequence whose tokens change is re-placed; each is
// O(log n) and allocates nothing once the heap has grown.

// key is the sequence as the ordered policy sees it, refreshed in place: it lives in the
// sequence record because a pointer passed through the policy's interface escapes, and a
// local would be allocated at every comparison.
func (s *sequence) key() *evict.Candidate {
	s.info = evict.Candidate{ID: uint64(s.id), Priority: s.priority, Arrival: s.arrival,
		Computed: len(s.tokens), Output: max(0, len(s.tokens)-s.promptLen)}
	return &s.info
}

// before is the heap's strict total order: the policy's, then smallest ID.
func (m *Manager) before(a, b *sequence) bool {
	if c := m.ordered.Compare(a.key(), b.key()); c != 0 {
		return c < 0
	}
	return a.id < b.id
}

func (m *Manager) orderSet(i int, s *sequence) {
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

// orderPush adds a sequence that starts running.
// Without an ordered policy, order is just the running sequences in no order (a
// sequence's pos is its place), so that Preempt lists the candidates without iterating
// the map.
func (m *Manager) orderPush(s *sequence) {
	m.order = append(m.order, s)
	if m.ordered == nil {
		s.pos = int32(len(m.order) - 1)
		return
	}
	m.orderUp(len(m.order) - 1)
}

// orderRemove takes out a sequence that stops running (a no-op for one not in the heap).
func (m *Manager) orderRemove(s *sequence) {
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
func (m *Manager) orderFix(s *sequence) {
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
func (m *Manager) orderNext() (*sequence, bool) {
	f := m.frontier
	if len(f) == 0 {
		return nil, false
	}
	top := f[0]
	last := len(f) - 1
	f[0] = f[last]
	f = f[:last]
	frontierDown(m, f, 0)
	for _, c := range [2]int32{2*top + 1, 2*top + 2} {
		if int(c) < len(m.order) {
			f = append(f, c)
			frontierUp(m, f, len(f)-1)
		}
	}
	m.frontier = f
	return m.order[top], true
}

func frontierUp(m *Manager, f []int32, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !m.before(m.order[f[i]], m.order[f[p]]) {
			return
		}
		f[i], f[p] = f[p], f[i]
		i = p
	}
}

func frontierDown(m *Manager, f []int32, i int) {
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
