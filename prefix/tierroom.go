package prefix

// Making room in a lower tier, for maintainers: one rule for both trees' tiers (an
// Index's, tierstore.go, and a GroupTree's, grouptree_tiers.go). The tree answers what a
// victim slot means in its own books (roomOwner); makeRoom decides what happens to it.

// roomOwner is a tree's side of makeRoom, over the slots of its lower tiers.
type roomOwner interface {
	// lowerLevel is lower tier t's slot level, nil beyond the last tier.
	lowerLevel(t Tier) *slotLevel
	// victimBelow reports whether the tier below t holds or receives the block in slot
	// k of tier t.
	victimBelow(t Tier, k int32) bool
	// writeDown reserves a slot of the tier below t for the block in slot k of tier t
	// (making room there if it must), pins k, marks it leaving and queues the copy; it
	// reports false, changing nothing, when the tier below has no room.
	writeDown(t Tier, k int32) bool
	// dropVictim frees slot k of tier t, off the policy already.
	dropVictim(t Tier, k int32)
}

// makeRoom frees one slot of lower tier t by its policy: a victim at the last tier, or
// whose tier below is not write-back, or which the tier below holds or receives already,
// is dropped; any other victim is written back to the tier below (its slot frees when the
// copy completes) and the next victim is tried, up to a batch of a 64th of the tier:
// then no slot is free now, and the write-backs started free some by the time their plan
// completes; if that copy fails, the victim stays (keepFailedWriteBack). A victim the
// tier below has no room for is dropped.
//
// A hold (Index.Hold, GroupTree.Hold) makes room by the same rule, never by dropping a
// victim a write-back tier below would have taken: under a write-back tier 2, tier 1's
// candidates have no copy below (write-back copies a block down only as tier 1 evicts
// it), so HoldNeed counts tier 1's free slots alone as a hold's room, and a hold within it
// makes no room at all. (Before, a hold dropped such victims at once, their KV lost.)
func makeRoom(o roomOwner, t Tier) bool {
	l := o.lowerLevel(t)
	next := o.lowerLevel(t + 1)
	batch := max(1, l.spec.Capacity/64)
	for started := 0; started < batch; started++ {
		k, ok := l.policy.Victim()
		if !ok {
			return false
		}
		if next == nil || next.spec.Write != WriteBack || o.victimBelow(t, k) || !o.writeDown(t, k) {
			o.dropVictim(t, k)
			return true
		}
	}
	return false
}
