package blocktable

import "github.com/kvpage/kvpage/blocks"

// A release plan answers "how many blocks would become available (free, or reclaimable by
// the index) if these sequences released their tables?" without changing anything. It
// mirrors what the pool and the prefix index do on release: an uncached block is freed
// when its last holder leaves; a cached block becomes reclaimable when no sequence holds
// it and no cached block below it is pinned, and unpinning it may unpin its ancestors in
// turn. The last point matters after duplicate commits: a sequence whose own block was a
// duplicate commits its next blocks under the index's copy without holding that copy, so a
// cached block can stay pinned after its last holder leaves, or be pinned only by another
// sequence's blocks below it.
//
// Per-block figures live in Manager scratch arrays stamped with a plan generation, so a
// new plan costs nothing to start and nothing is allocated once the arrays are sized.

// planBegin starts a new, empty release plan.
func (m *Manager) planBegin() {
	if n := m.pool.NumBlocks(); len(m.planHolders) < n {
		m.planHolders = make([]int32, n)
		m.planKids = make([]int32, n)
		m.planStamp = make([]uint32, n)
		m.planGen = 0
	}
	m.planGen++
	if m.planGen == 0 { // wrapped: old stamps could look current
		clear(m.planStamp)
		m.planGen = 1
	}
}

// planLoad brings block b into the current plan: its sequence holders (its refcount less
// the index's reference) and, for a cached block, its pinned children.
func (m *Manager) planLoad(b blocks.ID) {
	if m.planStamp[b] == m.planGen {
		return
	}
	m.planStamp[b] = m.planGen
	h := int32(m.pool.RefCount(b))
	kids := int32(0)
	if m.index != nil && m.index.IsCached(b) {
		h--
		_, _, k := m.index.PinInfo(b)
		kids = int32(k)
	}
	m.planHolders[b], m.planKids[b] = h, kids
}

// planRelease adds s's release to the plan and returns how many more blocks the plan makes
// available: uncached blocks left with no holder, and cached blocks it unpins (its own
// and ancestors it leaves with nothing pinned below them).
func (m *Manager) planRelease(s *sequence) int {
	gain := 0
	for _, id := range s.t.ids[s.t.nulls:] {
		b := id
		m.planLoad(b)
		m.planHolders[b]--
		if m.planHolders[b] != 0 {
			continue
		}
		if m.index == nil || !m.index.IsCached(b) {
			gain++
			continue
		}
		// Walk up while blocks lose their last pin, as prefix.Index.Release does.
		for {
			if m.planHolders[b] > 0 || m.planKids[b] > 0 {
				break
			}
			gain++
			p, ok, _ := m.index.PinInfo(b)
			if !ok {
				break
			}
			b = p
			m.planLoad(b)
			m.planKids[b]--
		}
	}
	return gain
}
