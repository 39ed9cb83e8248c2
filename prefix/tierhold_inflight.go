package prefix

// HoldInFlight is how many of the blocks hold h keeps have their only copy in flight: no
// device block and no lower tier holds their KV yet, and a copy into a lower tier is
// under way. Only a demotion under TierConfig.StreamOrdered leaves a block so, once
// TakePlans handed it out and the device evicted its block, until the copy's
// CompleteTransfer. No lookup finds such a block until the copy is confirmed: a swapped
// sequence resumed now would compute it again (blocktable.Manager.Resume waits instead). A
// copy between lower tiers whose source a failed load found bad is not counted: it will
// land nowhere (CompleteTransfer), so there is nothing to wait for. 0 for an ID that names
// no hold, and without lower tiers.
func (x *Index) HoldInFlight(h HoldID) int {
	ts := x.tiers
	if ts == nil {
		return 0
	}
	k := 0
	for _, r := range ts.holds[h] {
		en := &ts.ents[r.at]
		if !x.holdLive(r) || en.dev != 0 || en.bestTier() != 0 {
			continue
		}
		for i, st := range en.st {
			// leaving: a failed load's, dropped once its last load ends; a doomed slot
			// (slotDoomed) is not slotPending.
			if st == slotPending && !en.leaving[i] {
				k++
				break
			}
		}
	}
	return k
}

// InFlightSlots is how many of lower tier t's slots copies in flight occupy and no hold
// keeps: slots receiving a copy (pending, doomed included), and resident slots a load or a
// copy down reads. They leave that state as the server confirms the copies
// (CompleteTransfer), so Hold's room (HoldNeed) may grow by up to this many: a caller
// that compares HoldNeed's need and room itself, and refuses with a TierFullError of its
// own (blocktable.Manager's swap), fills InFlight with tier 1's, as Hold does. 0 without
// lower tiers and for a tier the index lacks. It reads every slot of the tier: O(its
// capacity), for a refusal path, not a hot one.
func (x *Index) InFlightSlots(t Tier) int {
	ts := x.tiers
	if ts == nil || t < 1 || int(t) > len(ts.lv) {
		return 0
	}
	i, n := t-1, 0
	for _, o := range ts.lv[i].owner {
		if o == 0 {
			continue
		}
		if en := &ts.ents[o-1]; en.holds == 0 && (en.st[i] == slotPending || en.st[i] == slotDoomed || en.pins[i] > 0) {
			n++
		}
	}
	return n
}
