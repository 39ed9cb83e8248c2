package prefix

// HoldInFlight is how many of the blocks hold h keeps have their only copy in flight: no
// device block and no lower tier holds their KV yet, and a copy into a lower tier is
// under way. Two things leave a block so, each until the CompleteTransfer of a copy
// already prepared: a demotion under TierConfig.StreamOrdered once TakePlans handed it
// out (and released its device block); and, StreamOrdered or not, a copy between lower
// tiers whose source a failed load hid meanwhile. No lookup finds such a block until the copy is confirmed: a swapped sequence
// resumed now would compute it again (blocktable.Manager.Resume waits instead). 0 for an
// ID that names no hold, and without lower tiers.
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
			if st == slotPending && !en.leaving[i] { // leaving: a failed load's, dropped once its last load ends
				k++
				break
			}
		}
	}
	return k
}
