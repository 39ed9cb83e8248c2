package blocktable

// A release plan answers "how many blocks would become available (free, or reclaimable by
// the index) if these sequences released their tables?" without changing anything. With an
// index, the index plans it (prefix.Index.PlanRelease: it knows which cached blocks a
// release unpins). Without one every block is uncached and comes free when its last holder
// leaves, which the Manager counts itself, with per-block holder counts stamped by a plan
// generation so that a new plan costs nothing to start.

// planBegin starts a new, empty release plan.
func (m *Manager) planBegin() {
	if m.index != nil {
		m.rplan.Reset()
		return
	}
	if n := m.pool.NumBlocks(); len(m.planHolders) < n {
		m.planHolders = make([]int32, n)
		m.planStamp = make([]uint32, n)
		m.planGen = 0
	}
	m.planGen++
	if m.planGen == 0 { // wrapped: old stamps could look current
		clear(m.planStamp)
		m.planGen = 1
	}
}

// planRelease adds s's release to the plan and returns how many more blocks the plan makes
// available.
func (m *Manager) planRelease(s *sequence) int {
	live := s.t.ids[s.t.nulls:]
	if m.index != nil {
		return m.index.PlanRelease(&m.rplan, live)
	}
	gain := 0
	for _, b := range live {
		if m.planStamp[b] != m.planGen {
			m.planStamp[b] = m.planGen
			m.planHolders[b] = int32(m.pool.RefCount(b))
		}
		if m.planHolders[b]--; m.planHolders[b] == 0 {
			gain++
		}
	}
	return gain
}
