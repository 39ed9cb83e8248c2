package prefix

// A lower-tier slot's failed copies, for maintainers: one rule for both trees' tiers (an
// Index's, tierstore.go, and a GroupTree's, grouptree_tiers.go), which keep a slot's copy
// state in different places (an Index per entry, a GroupTree per level). The tree hands
// out a view of a slot's state (slotOwner); the rules below change it.

// slotView is one lower-tier slot's copy state, in its tree's own books.
type slotView struct {
	st      *uint8  // slotNone, slotPending, slotResident, slotDoomed
	leaving *bool   // drop the slot when its last pin goes
	pins    *int32  // in-flight copies reading the slot
	touched *uint64 // last access, for the tier's policy
}

// slotOwner is a tree's side of the failed-copy rules, over the slots of its lower tiers.
type slotOwner interface {
	// lowerLevel is lower tier t's slot level, nil beyond the last tier.
	lowerLevel(t Tier) *slotLevel
	// slotOf is the state of slot k of lower tier t.
	slotOf(t Tier, k int32) slotView
	// slotBelow is the state of the slot the tier below t has of the block in slot k of
	// tier t; ok is false when it has none (or t is the last tier).
	slotBelow(t Tier, k int32) (v slotView, ok bool)
	// slotTime is the time a slot used now is ranked at: an Index reads its clock, a
	// GroupTree ticks its own.
	slotTime() uint64
	// slotEvicted counts slot k of lower tier t, resident until now, evicted (Lost too
	// when no tier below holds its block) and reports it removed to the tree's observer.
	slotEvicted(t Tier, k int32)
}

// keepFailedWriteBack keeps slot k of lower tier t, the source of a copy into the tier
// below that failed: a write-back (makeRoom) marked it leaving, to be dropped once copied,
// but it still holds the block, so it stays, ranked as used now (the failed demotion's
// rule on the device, Index.keepFailedDemotion). A source a failed load hid (pending)
// still goes.
func keepFailedWriteBack(o slotOwner, t Tier, k int32) {
	if s := o.slotOf(t, k); *s.st == slotResident && *s.leaving {
		*s.leaving = false
		*s.touched = o.slotTime()
	}
}

// failSlot evicts slot k's block from lower tier t after a failed load from it: at once
// for lookups and events, and the slot itself when the last copy reading it ends (until
// then it counts as pending, busy with copies in flight). The slot's bytes are no longer
// trusted: a copy of it into the tier below that is still in flight lands nowhere
// (slotDoomed). A copy of it confirmed before stands: the server confirmed it.
func failSlot(o slotOwner, t Tier, k int32) {
	s := o.slotOf(t, k)
	*s.leaving = true
	// A pending slot below is the copy of this one: copies between lower tiers go one
	// tier down, from the slot the block has in the tier above (pinned until it ends).
	// One a failed load of its own hid (leaving) receives nothing and stays as it is.
	if d, ok := o.slotBelow(t, k); ok && *d.st == slotPending && !*d.leaving {
		*d.st = slotDoomed
	}
	if *s.pins <= 1 || *s.st != slotResident {
		return // unpinSlot drops it now
	}
	o.lowerLevel(t).hide()
	*s.st = slotPending
	o.slotEvicted(t, k)
}
