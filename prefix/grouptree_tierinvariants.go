package prefix

import "fmt"

// checkTiers verifies the lower tiers' books and adds each node's lower-tier entries to
// perNode: per tier, every slot is free exactly once or holds a live prefix node's (node,
// group) whose at names it back, resident and pending counts add up, the policy holds
// exactly the candidate slots (resident, unpinned, not leaving), a leaving slot has a
// copy reading it, and pins are the copies in flight reading each slot; transfer
// references on device blocks are the copies in flight that read or fill them.
func (t *GroupTree) checkTiers(perNode []int32) error {
	ts := t.tiers
	pins := make([][]int32, len(ts.lv))
	for i := range ts.lv {
		pins[i] = make([]int32, ts.lv[i].spec.Capacity)
	}
	devRefs := make([]int32, len(ts.devRefs))
	// A store's device source is cached when the store is prepared, but the owner may
	// drop it meanwhile (an EvictBlocks): the copy still completes into its reserved slot.
	count := func(op tierOp, srcFreed bool) error {
		if op.from == Device && srcFreed {
			// a StreamOrdered store's source, released when TakePlans handed it out
		} else if op.from == Device {
			if uint(op.src) >= uint(len(devRefs)) {
				return fmt.Errorf("a store reads device block %d, outside the pool", op.src)
			}
			devRefs[op.src]++
		} else {
			pins[op.from-1][op.src]++
		}
		if op.to == Device {
			devRefs[op.dst]++
		}
		return nil
	}
	for _, op := range ts.queue {
		if err := count(op, false); err != nil {
			return err
		}
	}
	for _, r := range ts.plans {
		for _, op := range r.ops {
			if err := count(op, r.srcFreed); err != nil {
				return err
			}
		}
	}
	for i := range ts.lv {
		l := &ts.lv[i]
		tier := Tier(i + 1)
		if len(l.at) != len(t.nodes)*t.ng {
			return fmt.Errorf("tier %d: %d slots per (node, group) for %d nodes", tier, len(l.at), len(t.nodes))
		}
		res, pend, cand := 0, 0, 0
		for s, n := range l.node {
			if n == 0 {
				if l.st[s] != slotNone || l.pins[s] != 0 || l.leaving[s] {
					return fmt.Errorf("tier %d: free slot %d has a state", tier, s)
				}
				continue
			}
			if !t.isPrefixNode(n) || int(l.group[s]) >= t.ng || l.at[int(n)*t.ng+int(l.group[s])] != int32(s)+1 {
				return fmt.Errorf("tier %d: slot %d holds node %d group %d, which does not name it", tier, s, n, l.group[s])
			}
			perNode[n]++
			switch l.st[s] {
			case slotResident:
				res++
			case slotPending:
				pend++
			case slotDoomed:
				pend++
				if l.pins[s] != 0 || l.leaving[s] {
					return fmt.Errorf("tier %d: doomed slot %d is read or leaving", tier, s)
				}
			default:
				return fmt.Errorf("tier %d: slot %d has no state", tier, s)
			}
			if l.pins[s] != pins[i][s] {
				return fmt.Errorf("tier %d: slot %d counts %d pins but %d copies read it", tier, s, l.pins[s], pins[i][s])
			}
			if l.leaving[s] && l.pins[s] == 0 {
				return fmt.Errorf("tier %d: slot %d is leaving with no copy in flight", tier, s)
			}
			if l.candidate(int32(s)) {
				cand++
			}
		}
		for j, s := range l.at {
			if s != 0 && (int(s) > len(l.node) || int(l.node[s-1])*t.ng+int(l.group[s-1]) != j) {
				return fmt.Errorf("tier %d: (node, group) %d names slot %d, which holds another", tier, j, s-1)
			}
		}
		if err := l.checkCounts(tier, res, pend, cand, func(s int32) bool { return l.node[s] != 0 }); err != nil {
			return err
		}
	}
	for b, r := range ts.devRefs {
		if r != devRefs[b] {
			return fmt.Errorf("device block %d: %d transfer references, %d copies in flight", b, r, devRefs[b])
		}
	}
	return t.checkHolds()
}
