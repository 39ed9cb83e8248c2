package prefix

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
)

// Holds in a GroupTree's lower tiers, for maintainers: the GroupTree's side of an Index's
// holds (tierhold.go), for a hybrid sequence swapped out into the tiers. A hold counts one
// on each lower-tier slot holding or receiving a (node, group) of the held blocks
// (gtierLevel.holds); a held slot is no eviction candidate (candidate), so only a failed
// transfer or Clear drops it. A hold names its slots with their generation (gtierLevel.hgen,
// bumped when a slot is freed), so that ReleaseHold skips a slot freed and reused since.

// firstVisit reports whether device block b is cached and its (node, group) not yet seen
// in this pass: a duplicate's (node, group) is marked at its first block, so that two
// blocks of one (node, group) count once, as they need one copy.
func (t *GroupTree) firstVisit(b blocks.ID) (GroupEntry, bool) {
	ts := t.tiers
	e, ok := t.Entry(b)
	if !ok {
		return GroupEntry{}, false
	}
	f := t.First(e.Node, e.Group)
	if uint(f) >= uint(len(ts.mark)) || ts.mark[f] == ts.markGen {
		return GroupEntry{}, false
	}
	ts.mark[f] = ts.markGen
	return e, true
}

// HoldNeed reports, for the device blocks ids (a prefix's blocks over its groups, as Hold
// takes them), how many copies into tier 1 Hold would prepare (need: the cached blocks
// whose (node, group) no lower tier holds or receives, and each uncached block of the
// pool but the null block (block 0), which the caller will cache before Hold, as an Index's HoldNeed counts it) and how
// many tier 1 can take now (room: its free slots plus its eviction candidates other than
// those ids hold there). A block listed twice counts once (as do two blocks of one (node,
// group)); an ID outside the pool not at all. Without lower tiers both are 0. It changes
// nothing.
//
// The rule is an Index's (Index.HoldNeed): Hold succeeds exactly when need <= room, and
// then prepares every copy it counted; under a write-back tier 2, tier 1's candidates
// have no copy below, none is dropped for a hold, and room is tier 1's free slots alone.
// A slot a failed load hid or doomed is no copy (HeldBelow): its block counts in need, and
// when that slot is tier 1's, room is at most need less such blocks (their copies have
// no slot until the failed load's copies end), so Hold refuses until then.
func (t *GroupTree) HoldNeed(ids []blocks.ID) (need, room int) {
	ts := t.tiers
	if ts == nil {
		return 0, 0
	}
	ts.nextMark(len(ts.devRefs))
	own, busy := 0, 0
	l := &ts.lv[0]
	for _, b := range ids {
		e, ok := t.firstVisit(b)
		if !ok {
			if b > blocks.NullID && int(b) < len(ts.mark) && !t.IsCached(b) && ts.mark[b] != ts.markGen {
				ts.mark[b] = ts.markGen // an uncached block's mark: its own ID, no First to share
				need++
			}
			continue
		}
		if !t.HeldBelow(e.Node, e.Group) {
			need++
			if t.tier1Busy(e.Node, e.Group) {
				busy++ // its copy has no tier-1 slot until the failed load's copies end
			}
		} else if s := l.at[int(e.Node)*t.ng+e.Group]; s != 0 && l.candidate(s-1) {
			own++
		}
	}
	return need, holdRoom(&l.slotLevel, t.lowerLevel(2), need, own, busy)
}

// Hold keeps the lower-tier copies of the cached device blocks ids until ReleaseHold:
// each (node, group) a lower tier holds or receives already (HeldBelow: a slot a failed
// load hid, or the doomed copy from it, is none) is held in every tier holding it, and each other block is copied into tier 1 (PrepareStore) and held there. It appends
// to stored the blocks whose copies it prepared: the owner holds one more reference on
// each, as after PrepareStore. Room for the copies is made as HoldNeed says. A held slot
// is evicted from no tier; only a failed transfer of it or Clear drops it. It takes
// cached blocks only, as an Index's Hold: an uncached one (the null block, a free block,
// an ID outside the pool) fails with ErrNotCached in a *BlockError naming it. It fails with
// *TierFullError (ErrTierFull) when HoldNeed's need exceeds its room, and with ErrNoTiers
// without lower tiers. A failed Hold changes nothing. A hold of no block is HoldID 0,
// which ReleaseHold accepts.
func (t *GroupTree) Hold(ids, stored []blocks.ID) (HoldID, []blocks.ID, error) {
	ts := t.tiers
	if ts == nil {
		return 0, stored, ErrNoTiers
	}
	for _, b := range ids {
		if _, ok := t.Entry(b); !ok {
			return 0, stored, &BlockError{Op: "hold", ID: b, Err: ErrNotCached}
		}
	}
	if need, room := t.HoldNeed(ids); need > room {
		return 0, stored, &TierFullError{Requested: need, Available: room, InFlight: t.inFlightSlots(1)}
	}
	t.BatchTierEvents() // the slots its copies drop to make room: one event per tier
	defer t.FlushTierEvents()
	refs := ts.newRefs()
	// What the lower tiers hold already first, so that making room for the copies cannot
	// evict it; then the copies.
	ts.nextMark(len(ts.devRefs))
	for _, b := range ids {
		if e, ok := t.firstVisit(b); ok && t.HeldBelow(e.Node, e.Group) {
			refs = t.holdSlots(refs, e.Node, e.Group)
		}
	}
	for _, b := range ids {
		e, _ := t.Entry(b)
		if t.HeldBelow(e.Node, e.Group) {
			continue
		}
		if !t.PrepareStore(b) {
			// Cannot happen: HoldNeed counted this copy within tier 1's room (free slots,
			// and candidates, which makeRoom drops at once, only when the tier below is
			// not write-back; none while a failed load's slot is the block's: tier1Busy),
			// and the holds above took no candidate it did not count (own). A failure
			// here is a broken invariant, with the hold half placed.
			panic(fmt.Sprintf("kvpage: broken invariant: Hold could not copy block %d that HoldNeed counted", b))
		}
		stored = append(stored, b)
		refs = t.holdSlots(refs, e.Node, e.Group)
	}
	return ts.place(refs), stored, nil
}

// holdSlots counts one more hold on every lower-tier slot of (n, g), taking each off its
// tier's eviction set.
func (t *GroupTree) holdSlots(refs []holdRef, n Node, g int) []holdRef {
	ts := t.tiers
	for i := range ts.lv {
		l := &ts.lv[i]
		s := l.at[int(n)*t.ng+g] - 1
		if s < 0 || !l.good(s) {
			continue // a failed load's slot or its doomed copy: nothing to keep
		}
		if l.candidate(s) {
			l.policy.Remove(s)
		}
		l.holds[s]++
		refs = append(refs, holdRef{at: s, tier: uint8(i + 1), gen: l.hgen[s]})
	}
	return refs
}

// HoldInFlight is how many of the (node, group)s hold h keeps have their only copy in
// flight: no device block and no lower tier holds their KV yet, and a copy into a lower
// tier is under way, as Index.HoldInFlight counts an Index's. Only a demotion under
// TierConfig.StreamOrdered leaves a block so, once TakePlans handed it out and the owner
// released its device block, until the copy's CompleteTransfer. No lookup finds such a
// block until the copy is confirmed: a swapped sequence resumed now would compute it
// again (blocktable/hybrid's Resume waits instead). A copy between lower tiers whose
// source a failed load found bad is not counted: it will land nowhere (CompleteTransfer).
// 0 for an ID that names no hold, and without lower tiers.
func (t *GroupTree) HoldInFlight(h HoldID) int {
	ts := t.tiers
	if ts == nil {
		return 0
	}
	k := 0
	last := -1 // a hold names the slots of one (node, group) one after another
	for _, r := range ts.holds[h] {
		l := &ts.lv[r.tier-1]
		// leaving: a failed load's, dropped once its last load ends; a doomed slot
		// (slotDoomed) is not slotPending.
		if !t.holdLive(r) || l.st[r.at] != slotPending || l.leaving[r.at] {
			continue
		}
		n, g := l.node[r.at], int(l.group[r.at])
		if i := int(n)*t.ng + g; i != last && t.First(n, g) == blocks.NullID && t.LowerTier(n, g) == Device {
			last = i
			k++
		}
	}
	return k
}

// The GroupTree's side of the book (tierholdbook.go): a ref names a slot of one tier.

func (t *GroupTree) holdLive(r holdRef) bool { return t.tiers.lv[r.tier-1].hgen[r.at] == r.gen }

func (t *GroupTree) unhold(r holdRef) {
	l := &t.tiers.lv[r.tier-1]
	if l.holds[r.at]--; l.holds[r.at] == 0 && l.candidate(r.at) {
		l.addCandidate(r.at)
	}
}

// ReleaseHold ends hold h: its slots no other hold keeps become eviction candidates again.
// HoldID 0 is a no-op; an ID that names no hold fails with ErrUnknownHold (ErrNoTiers
// without lower tiers) and changes nothing.
func (t *GroupTree) ReleaseHold(h HoldID) error {
	if h == 0 {
		return nil
	}
	ts := t.tiers
	if ts == nil {
		return ErrNoTiers
	}
	return ts.release(t, h)
}

// HeldBlocks is the number of lower-tier slots hold h keeps now, over all tiers (0 for an
// ID that names no hold).
func (t *GroupTree) HeldBlocks(h HoldID) int {
	if t.tiers == nil {
		return 0
	}
	return t.tiers.heldBlocks(t, h)
}

// Holds is the number of holds placed and not yet released.
func (t *GroupTree) Holds() int {
	if t.tiers == nil {
		return 0
	}
	return len(t.tiers.holds)
}

// checkHolds verifies that every slot counts exactly the live holds naming it, and that a
// free slot counts none.
func (t *GroupTree) checkHolds() error {
	ts := t.tiers
	counts := make([][]int32, len(ts.lv))
	for i := range ts.lv {
		counts[i] = make([]int32, len(ts.lv[i].holds))
	}
	valid := func(r holdRef) bool {
		return r.tier != 0 && int(r.tier) <= len(ts.lv) && r.at >= 0 && int(r.at) < len(counts[r.tier-1])
	}
	if err := ts.eachLive(t, valid, func(r holdRef) { counts[r.tier-1][r.at]++ }); err != nil {
		return err
	}
	for i := range ts.lv {
		l := &ts.lv[i]
		for s, c := range l.holds {
			if c != counts[i][s] || (l.node[s] == 0 && c != 0) {
				return fmt.Errorf("tier %d: slot %d counts %d holds, %d holds name it", i+1, s, c, counts[i][s])
			}
		}
	}
	return nil
}

// inFlightSlots is how many of lower tier tier's slots copies in flight occupy and no hold
// keeps, as an Index's InFlightSlots: slots receiving a copy, and resident slots a load or
// a copy down reads. TierFullError carries tier 1's. 0 without lower tiers and for a tier
// the tree lacks. O(the tier's capacity).
func (t *GroupTree) inFlightSlots(tier Tier) int {
	ts := t.tiers
	if ts == nil || tier < 1 || int(tier) > len(ts.lv) {
		return 0
	}
	l, n := &ts.lv[tier-1], 0
	for s, st := range l.st {
		if st != slotNone && l.holds[s] == 0 && (st == slotPending || st == slotDoomed || l.pins[s] > 0) {
			n++
		}
	}
	return n
}
