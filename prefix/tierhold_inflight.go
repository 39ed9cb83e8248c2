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
