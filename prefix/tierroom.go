package prefix

// Making room in a lower tier, for maintainers: one rule for both trees' tiers (an
// Index's, tierstore.go, and a GroupTree's, grouptree_tiers.go). The tree answers what a
// victim slot means in its own books (roomOwner); makeRoom decides what happens to it.

// roomOwner is a tree's side of makeRoom, over the slots of its lower tiers.
type roomOwner interface {
	// lowerLevel is lower tier t's slot level, nil beyond the last tier.
	lowerLevel(t Tier) *slotLevel
	// victimBelow says what the tier below t has of the block in slot k of tier t: no
	// slot (belowNone), a good copy held or received (belowGood), or a slot that is no
	// copy (belowBad: a failed load hid it, or it is doomed), which keeps the block's one
	// slot there busy until the copies reading it end.
	victimBelow(t Tier, k int32) uint8
	// keepVictim makes slot k of tier t, which makeRoom took as a victim and skipped, an
	// eviction candidate again, with the entry it had (for a policy that is no
	// evict.Restorer: giveBack).
	keepVictim(t Tier, k int32)
	// writeDown reserves a slot of the tier below t for the block in slot k of tier t
	// (making room there if it must), pins k, marks it leaving and queues the copy; it
	// reports false, changing nothing, when the tier below has no room.
	writeDown(t Tier, k int32) bool
	// dropVictim frees slot k of tier t, off the policy already.
	dropVictim(t Tier, k int32)
}

// What the tier below a victim has of its block (roomOwner.victimBelow).
const (
	belowNone uint8 = iota
	belowGood
	belowBad
)

// makeRoom frees one slot of lower tier t by its policy: a victim at the last tier, or
// whose tier below is not write-back, or which the tier below holds or receives a good
// copy of already, is dropped; any other victim is written back to the tier below (its
// slot frees when the copy completes) and the next victim is tried, up to a batch of a
// 64th of the tier: then no slot is free now, and the write-backs started free some by the
// time their plan completes; if that copy fails, the victim stays (keepFailedWriteBack). A
// victim the tier below has no room for is dropped.
//
// Under a write-back tier below, a victim whose slot there is no copy (a failed load hid
// it, or it is doomed: belowBad) is skipped, not dropped: the tier below cannot take it
// (one slot per block and tier, busy until the copies reading it end) and its slot in
// tier t is its only good lower-tier copy, so dropping it would lose a block an honest
// count keeps (before, it was dropped and counted Lost). Skipped victims become candidates
// again once the pass ends, with the rank they had (giveBack); a pass that finds only such
// victims frees nothing.
//
// A hold (Index.Hold, GroupTree.Hold) makes room by the same rule, never by dropping a
// victim a write-back tier below would have taken: under a write-back tier 2, tier 1's
// candidates have no copy below (write-back copies a block down only as tier 1 evicts
// it), so HoldNeed counts tier 1's free slots alone as a hold's room, and a hold within it
// makes no room at all. (Before, a hold dropped such victims at once, their KV lost.)
func makeRoom(o roomOwner, t Tier) bool {
	l := o.lowerLevel(t)
	next := o.lowerLevel(t + 1)
	back := next != nil && next.spec.Write == WriteBack
	batch := max(1, l.spec.Capacity/64)
	freed := false
	for started := 0; started < batch; {
		k, ok := l.policy.Victim()
		if !ok {
			break
		}
		below := belowNone
		if back {
			below = o.victimBelow(t, k)
		}
		if below == belowBad {
			l.popped = append(l.popped, k)
			continue
		}
		if len(l.popped) != 0 {
			l.popped = append(l.popped, ^k)
		}
		if !back || below == belowGood || !o.writeDown(t, k) {
			o.dropVictim(t, k)
			freed = true
			break
		}
		started++
	}
	if len(l.popped) != 0 {
		giveBack(o, t, l)
	}
	return freed
}

// giveBack makes the victims makeRoom skipped in lower tier t candidates again, ranked as
// they were, so that the tier's order is the one from which only the victims the pass
// took left. A policy that ranks by its history (FIFO's and S3FIFO's arrival numbers,
// SLRU's demotions) is an evict.Restorer: every pop since the first skip is undone, last
// first, and the victims taken among them are removed again. Any other ranks by the
// entries alone, and gets the skipped victims back by Add with their entries (keepVictim).
// Before, every policy got them back by Add: FIFO then ranked them as just arrived.
func giveBack(o roomOwner, t Tier, l *slotLevel) {
	if r := l.restorer; r != nil {
		for i := len(l.popped) - 1; i >= 0; i-- {
			k := l.popped[i]
			if k < 0 {
				k = ^k // taken, and removed again below
			}
			r.Restore(k)
		}
		for _, k := range l.popped {
			if k < 0 {
				l.policy.Remove(^k)
			}
		}
	} else {
		for _, k := range l.popped {
			if k >= 0 {
				o.keepVictim(t, k)
			}
		}
	}
	l.popped = l.popped[:0]
}
