package hybrid

import (
	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
)

// Explain is MatchRequest with an explanation: it returns the hit Admit would take for
// req, touching and counting nothing, and fills e with where and why the hit stopped
// (issue 18's miss reasons). With lower tiers the hit is MatchRequest's and Admit's, a
// lower-tier continuation that needs nothing loaded included; e then explains where that
// tiered lookup stopped. A continuation that must be loaded is not part of the hit
// (MatchTiers and AdmitTiered report it): e explains where the device's hit stopped. MatchedBlocks and FullBlocks are in match units. When a KV-cache
// group lowered the fixed point below what full attention (or the length cap) allowed,
// e.Group names it and e.Reason says why its block was missing:
//   - prefix.MissEvicted with Evicted = prefix.EvictWindow: the group released the block
//     mid-sequence (it left the sliding window, or a Mamba state was superseded) and it
//     was then evicted; Evicted = prefix.EvictPolicy: evicted in free queue order after
//     its sequence finished;
//   - prefix.MissSparseGap: with Config.SparseRetention, the group never kept the block
//     (it lies between retained boundaries);
//   - prefix.MissGroup: the group has no block there and no record says why (EvictBlocks
//     dropped it, or it was never stored);
//   - prefix.MissEAGLE or prefix.MissBelowUnit: every block the group needs is cached, and
//     its EAGLE drop or the alignment to the groups' block sizes took the rest.
//
// Otherwise full attention's own stop is explained: MissNone (everything the lookup
// could take), MissCapped (the next unit is cached but the len - 1 cap or HitLimit left it
// out), MissEAGLE, MissEvicted (its block there was evicted, with the cause, e.Group the
// full-attention group), MissNeverStored. It allocates nothing in steady state. A nil req
// or e is refused with blocktable.ErrInvalidArgument (errNilRequest), as Admit refuses a
// nil request.
func (m *Manager) Explain(req *Request, e *prefix.Explanation) (int, error) {
	if req == nil || e == nil {
		return 0, errNilRequest
	}
	n := len(req.Prompt)
	*e = prefix.Explanation{FullBlocks: n / m.unit}
	if n == 0 || req.SkipCacheRead || len(m.kinds) == 0 {
		return 0, nil
	}
	s := m.newSeq(&Request{Prompt: req.Prompt, MaxTokens: n, Namespace: req.Namespace})
	m.lowGroup = -1
	dev, hit, _, limit := m.find(s, req, n/m.unit) // walked past the cap: the cap is one of the reasons
	e.MatchedBlocks = hit / m.unit
	// A pure lower-tier continuation is explained over the tiered lookup's view: the
	// device before its own hit, the lower tiers from there.
	m.explainLower = hit > dev
	g0 := m.kinds[0][0]
	switch {
	case m.lowGroup >= 0:
		m.explainGroup(s, m.lowGroup, m.lowFrom, hit, e)
	case !m.specs[g0].Downward():
		// One kind of group, and not full attention (a pure sliding-window model): it
		// lowered the hit from the cap.
		m.explainGroup(s, g0, limit, hit, e)
	default:
		m.explainFull(s, g0, limit, hit, e)
	}
	m.explainLower = false
	m.spare = append(m.spare, s)
	return hit, nil
}

// explainGroup says why group g returned less than from (tokens), s.path walked.
func (m *Manager) explainGroup(s *seq, g, from, hit int, e *prefix.Explanation) {
	e.Group = g
	bs, k := m.bs[g], m.k[g]
	// The block that broke the run the group needed: its rightmost missing one below from.
	j := from/bs - 1
	for ; j >= 0; j-- {
		if !m.cachedFor(s, g, j) {
			break
		}
	}
	if j < 0 {
		if m.eagle && hit > 0 {
			e.Reason = prefix.MissEAGLE
		} else {
			e.Reason = prefix.MissBelowUnit // the alignment to the groups' LCM
		}
		return
	}
	u := (j+1)*k - 1
	if u >= len(s.path) {
		e.Reason = prefix.MissNeverStored
		return
	}
	if cause := m.st.t.Gone(s.path[u], g); cause != prefix.EvictNone {
		e.Reason, e.Evicted = prefix.MissEvicted, cause
		return
	}
	switch m.specs[g].(type) {
	case SlidingWindow, Mamba:
		if m.sparse {
			e.Reason = prefix.MissSparseGap
			return
		}
	}
	if m.anyGroupAt(s.path[u]) {
		e.Reason = prefix.MissGroup
	} else {
		e.Reason = prefix.MissNeverStored
	}
}

// explainFull says why full attention (group g0, the first kind) stopped at hit.
func (m *Manager) explainFull(s *seq, g0, limit, hit int, e *prefix.Explanation) {
	bs := m.bs[g0]
	c := 0 // the kind's cached blocks from the start, uncapped
	for c < len(s.tokens)/bs && m.cachedFor(s, g0, c) {
		c++
	}
	switch {
	case c*bs <= hit:
		if c < len(s.tokens)/bs {
			m.explainMissing(s, g0, c, e)
		}
	case m.eagle && hit == (c-1)*bs/m.lcm*m.lcm:
		e.Reason = prefix.MissEAGLE
	case hit == limit/m.lcm*m.lcm || hit+bs > limit:
		e.Reason = prefix.MissCapped
	default:
		e.Reason = prefix.MissBelowUnit
	}
}

// explainMissing says why group g has no block j along s.path.
func (m *Manager) explainMissing(s *seq, g, j int, e *prefix.Explanation) {
	u := (j+1)*m.k[g] - 1
	if u >= len(s.path) {
		e.Reason = prefix.MissNeverStored
		return
	}
	if cause := m.st.t.Gone(s.path[u], g); cause != prefix.EvictNone {
		e.Reason, e.Evicted, e.Group = prefix.MissEvicted, cause, g
		return
	}
	e.Reason = prefix.MissNeverStored
}

// cachedFor reports whether group g (alone, not its kind) has block j of s.path cached:
// on the device, or, when Explain explains a pure lower-tier continuation, past the
// device hit in a lower tier (as the tiered lookup reads it: lowerView).
func (m *Manager) cachedFor(s *seq, g, j int) bool {
	u := (j+1)*m.k[g] - 1
	if u >= len(s.path) {
		return false
	}
	if m.explainLower && u >= m.view.devUnits {
		return m.view.lower(s.path[u], g)
	}
	return m.st.first(s.path[u], g) != blocks.NullID
}

// anyGroupAt reports whether some group has a block cached at node n.
func (m *Manager) anyGroupAt(n prefix.Node) bool {
	for g := range m.ng {
		if m.st.first(n, g) != blocks.NullID {
			return true
		}
	}
	return false
}
