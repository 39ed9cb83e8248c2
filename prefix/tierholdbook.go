package prefix

import "fmt"

// The record of holds, for maintainers: one book for both trees' tiers (an Index's,
// tierhold.go, and a GroupTree's, grouptree_tierhold.go). A hold is a list of refs, each
// naming what it keeps (an Index's entry, or a GroupTree's slot in one tier) with that
// thing's generation when held, so that a ref to an entry or slot freed and reused since
// (a failed transfer, a Reset or Clear) is stale and skipped. The tree counts the holds on
// each of its entries or slots and answers, through holdOwner, whether a ref is live and
// what ending one hold on it does.

// holdRef names what one hold keeps: entry at of an Index's tiers (tier unused), or slot
// at of a GroupTree's tier; gen is its generation when held.
type holdRef struct {
	at   int32
	tier uint8
	gen  uint32
}

// holdOwner is a tree's side of the book.
type holdOwner interface {
	// holdLive reports whether r still names what it held.
	holdLive(r holdRef) bool
	// unhold ends one hold on r's entry or slot (live): with no hold left, it is an
	// eviction candidate again wherever it is one.
	unhold(r holdRef)
}

// holdBook is the holds placed and not released, with their IDs.
type holdBook struct {
	holds    map[HoldID][]holdRef
	nextHold HoldID
	holdFree [][]holdRef
	mark     []uint32 // per device block: the pass that last counted it (HoldNeed, Hold)
	markGen  uint32
}

// nextMark starts a pass that counts each of n device blocks once.
func (b *holdBook) nextMark(n int) {
	if b.mark == nil {
		b.mark = make([]uint32, n)
	}
	if b.markGen++; b.markGen == 0 {
		clear(b.mark)
		b.markGen = 1
	}
}

// newRefs returns an empty ref list for a hold being placed, a released one's if any.
func (b *holdBook) newRefs() []holdRef {
	k := len(b.holdFree)
	if k == 0 {
		return nil
	}
	refs := b.holdFree[k-1]
	b.holdFree = b.holdFree[:k-1]
	return refs
}

// place records the hold of refs and returns its ID: 0, and nothing recorded, for none.
func (b *holdBook) place(refs []holdRef) HoldID {
	if len(refs) == 0 {
		b.holdFree = append(b.holdFree, refs)
		return 0
	}
	if b.holds == nil {
		b.holds = make(map[HoldID][]holdRef)
	}
	b.nextHold++
	b.holds[b.nextHold] = refs
	return b.nextHold
}

// release ends hold h (not 0), each of its live refs unheld; an ID that names no hold
// fails with ErrUnknownHold and changes nothing.
func (b *holdBook) release(o holdOwner, h HoldID) error {
	refs, ok := b.holds[h]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownHold, h)
	}
	delete(b.holds, h)
	for _, r := range refs {
		if o.holdLive(r) { // else dropped by a failed transfer, a Reset or Clear since
			o.unhold(r)
		}
	}
	b.holdFree = append(b.holdFree, refs[:0])
	return nil
}

// heldBlocks is the number of live refs of hold h (0 for an ID that names no hold).
func (b *holdBook) heldBlocks(o holdOwner, h HoldID) int {
	k := 0
	for _, r := range b.holds[h] {
		if o.holdLive(r) {
			k++
		}
	}
	return k
}

// eachLive calls f for every live ref of every hold, after valid has accepted every ref
// (its range), and returns the first error.
func (b *holdBook) eachLive(o holdOwner, valid func(r holdRef) bool, f func(r holdRef)) error {
	for h, refs := range b.holds {
		for _, r := range refs {
			if !valid(r) {
				return fmt.Errorf("hold %d names tier %d, %d", h, r.tier, r.at)
			}
			if o.holdLive(r) {
				f(r)
			}
		}
	}
	return nil
}
