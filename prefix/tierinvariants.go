package prefix

import "fmt"

// checkTiers verifies the lower tiers' books: per tier, every slot is free exactly once or
// owned by the entry that names it, resident and pending counts add up, and the policy
// holds exactly the candidate slots (resident, unpinned, not leaving); every live entry is
// found under its key, holds some tier, and its device link is a cached node with its key
// whose own link points back; transfer references on device blocks add up to the copies
// in flight, pins to the copies reading each slot, and demoting to the flagged blocks.
func (x *Index) checkTiers() error {
	ts := x.tiers
	pins := make([][lowerTiers]int32, len(ts.ents))
	devRefs := make([]int32, x.nb)
	count := func(op tierOp, srcFreed bool) {
		if op.from == Device {
			if !srcFreed { // a StreamOrdered store's source was released when handed out
				devRefs[op.src]++
			}
		} else {
			pins[op.e][op.from-1]++
		}
		if op.to == Device {
			devRefs[op.dst]++
		}
	}
	for _, op := range ts.queue {
		count(op, false)
	}
	for _, r := range ts.plans {
		for _, op := range r.ops {
			count(op, r.srcFreed)
		}
	}
	for i := range ts.lv {
		l := &ts.lv[i]
		t := Tier(i + 1)
		res, pend, cand := 0, 0, 0
		for s, o := range l.owner {
			if o == 0 {
				continue
			}
			en := &ts.ents[o-1]
			if !en.live || en.slot[i] != int32(s)+1 {
				return fmt.Errorf("tier %d: slot %d owned by entry %d, which does not name it", t, s, o-1)
			}
			switch en.st[i] {
			case slotResident:
				res++
			case slotPending:
				pend++
			case slotDoomed:
				pend++
				if en.pins[i] != 0 || en.leaving[i] {
					return fmt.Errorf("tier %d: entry %d's doomed slot is read or leaving", t, o-1)
				}
			default:
				return fmt.Errorf("tier %d: slot %d of entry %d has no state", t, s, o-1)
			}
			if en.pins[i] != pins[o-1][i] {
				return fmt.Errorf("tier %d: entry %d counts %d pins but %d copies read it", t, o-1, en.pins[i], pins[o-1][i])
			}
			if en.leaving[i] && en.pins[i] == 0 {
				return fmt.Errorf("tier %d: entry %d is leaving with no copy in flight", t, o-1)
			}
			if en.candidate(t) {
				cand++
			}
		}
		if err := l.checkCounts(t, res, pend, cand, func(s int32) bool { return l.owner[s] != 0 }); err != nil {
			return err
		}
	}
	live := 0
	for e := range ts.ents {
		en := &ts.ents[e]
		if !en.live {
			continue
		}
		live++
		if got := ts.byKey.find(en.key, ts.ents); got != int32(e) {
			return fmt.Errorf("entry %d is not found under its key", e)
		}
		held := false
		for i := range lowerTiers {
			if en.slot[i] != 0 {
				held = true
				if i >= len(ts.lv) || ts.lv[i].owner[en.slot[i]-1] != int32(e)+1 {
					return fmt.Errorf("entry %d names slot %d of tier %d, which it does not own", e, en.slot[i]-1, i+1)
				}
			}
		}
		if !held {
			return fmt.Errorf("entry %d is held by no lower tier", e)
		}
		if n := en.dev; n != 0 {
			if !x.isBlock(n) || x.nodes[n].flags&flagCached == 0 || x.nodes[n].key != en.key || ts.devEnt[n] != int32(e)+1 {
				return fmt.Errorf("entry %d names device block %d, which is not its cached copy", e, n-1)
			}
		}
	}
	keys := 0
	for _, s := range ts.byKey.slots {
		if s.e != 0 {
			keys++
			if en := &ts.ents[s.e-1]; !en.live || s.tag != keyTag(en.key) {
				return fmt.Errorf("the key table names entry %d, which is free or has another key", s.e-1)
			}
		}
	}
	if live != keys || keys != ts.byKey.n || live+len(ts.freeE) != len(ts.ents) {
		return fmt.Errorf("%d live entries, %d keys (%d counted), %d free of %d", live, keys, ts.byKey.n, len(ts.freeE), len(ts.ents))
	}
	demoting := 0
	for n := int32(1); int(n) <= x.nb; n++ {
		if e := ts.devEnt[n]; e != 0 && ts.ents[e-1].dev != n {
			return fmt.Errorf("device block %d links entry %d, which does not name it", n-1, e-1)
		}
		if x.nodes[n].flags&flagDemote != 0 {
			demoting++
		}
		if ts.devRefs[n-1] != devRefs[n-1] {
			return fmt.Errorf("device block %d: %d transfer references, %d copies in flight", n-1, ts.devRefs[n-1], devRefs[n-1])
		}
	}
	if demoting != ts.demoting {
		return fmt.Errorf("%d blocks flagged demoting, counted %d", demoting, ts.demoting)
	}
	return x.checkHolds()
}
