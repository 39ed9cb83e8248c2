package hybrid

// find is the one lookup of Admit, AdmitCost, MatchTiers, MatchRequest and Explain: for
// req (its HitLimit and SkipCacheRead; s its new record, whose path it walks over the
// first walk units, or up to the cap when walk < 0) it returns the device's own hit
// (dev), the hit Admit takes (dev and a lower-tier continuation that needs nothing
// loaded), full (the hit with the lower tiers' continuation: the tokens from hit to full
// are loaded; full == hit without one) and the cap (limit) the lookup ran under.
// m.lowGroup and m.lowFrom say who lowered the device's fixed point, or the tiered one
// when a pure continuation extends the hit (Explain reads them).
func (m *Manager) find(s *seq, req *Request, walk int) (dev, hit, full, limit int) {
	if req.SkipCacheRead {
		return 0, 0, 0, 0
	}
	limit = len(req.Prompt) - 1
	if req.HitLimit > 0 {
		limit = min(limit, req.HitLimit)
	}
	if walk < 0 {
		walk = limit / m.unit
	}
	m.walk(s, walk)
	dev = m.hit(s, limit)
	hit, full = dev, dev
	if m.st.tiers != nil && dev < limit {
		low, from := m.lowGroup, m.lowFrom
		hit, full = m.hitTiers(s, limit, dev)
		if hit == dev {
			m.lowGroup, m.lowFrom = low, from // no pure continuation: the hit is the device's
		}
	}
	return dev, hit, full, limit
}
