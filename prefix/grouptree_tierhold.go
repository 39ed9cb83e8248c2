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

type gtHoldRef struct {
	tier uint8
	slot int32
	gen  uint32
}

// gtHoldBook is a GroupTree's record of holds.
type gtHoldBook struct {
	holds    map[HoldID][]gtHoldRef
	nextHold HoldID
	holdFree [][]gtHoldRef
	mark     []uint32 // per device block: the pass that last counted it
	markGen  uint32
}

func (ts *gtierStore) nextMark() {
	if ts.mark == nil {
		ts.mark = make([]uint32, len(ts.devRefs))
	}
	if ts.markGen++; ts.markGen == 0 {
		clear(ts.mark)
		ts.markGen = 1
	}
}

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

// HoldNeed reports, for the cached device blocks ids (a prefix's blocks over its groups,
// as Hold takes them), how many copies into tier 1 Hold would prepare (need: the blocks
// whose (node, group) no lower tier holds or receives) and how many tier 1 can take now
// (room: its free slots plus its eviction candidates other than those ids hold there). A
// block listed twice counts once (as do two blocks of one (node, group)), an uncached one
// not at all. Without lower tiers both are 0. It changes nothing.
//
// The rule is an Index's (Index.HoldNeed): Hold succeeds exactly when need <= room, and
// then prepares every copy it counted; to make room for a hold, tier 1 drops its victims
// at once, also when the tier below is write-back.
func (t *GroupTree) HoldNeed(ids []blocks.ID) (need, room int) {
	ts := t.tiers
	if ts == nil {
		return 0, 0
	}
	ts.nextMark()
	own := 0
	l := &ts.lv[0]
	for _, b := range ids {
		e, ok := t.firstVisit(b)
		if !ok {
			continue
		}
		if !t.HeldBelow(e.Node, e.Group) {
			need++
		} else if s := l.at[int(e.Node)*t.ng+e.Group]; s != 0 && l.candidate(s-1) {
			own++
		}
	}
	return need, len(l.free) + l.policy.Len() - own
}

// Hold keeps the lower-tier copies of the cached device blocks ids until ReleaseHold:
// each (node, group) a lower tier holds or receives already is held in every tier holding
// it, and each other block is copied into tier 1 (PrepareStore) and held there. It appends
// to stored the blocks whose copies it prepared: the owner holds one more reference on
// each, as after PrepareStore. Room for the copies is made as HoldNeed says. A held slot
// is evicted from no tier; only a failed transfer of it or Clear drops it. It fails with *TierFullError (ErrTierFull) when HoldNeed's need
// exceeds its room, and with ErrNoTiers without lower tiers, changing nothing. Uncached
// blocks are skipped. A hold of no block is HoldID 0, which ReleaseHold accepts.
func (t *GroupTree) Hold(ids, stored []blocks.ID) (HoldID, []blocks.ID, error) {
	ts := t.tiers
	if ts == nil {
		return 0, stored, ErrNoTiers
	}
	if need, room := t.HoldNeed(ids); need > room {
		return 0, stored, &TierFullError{Requested: need, Available: room}
	}
	t.BatchTierEvents() // the slots its copies drop to make room: one event per tier
	defer t.FlushTierEvents()
	var refs []gtHoldRef
	if k := len(ts.holdFree); k > 0 {
		refs = ts.holdFree[k-1]
		ts.holdFree = ts.holdFree[:k-1]
	}
	// What the lower tiers hold already first, so that making room for the copies cannot
	// evict it; then the copies.
	ts.nextMark()
	for _, b := range ids {
		if e, ok := t.firstVisit(b); ok && t.HeldBelow(e.Node, e.Group) {
			refs = t.holdSlots(refs, e.Node, e.Group)
		}
	}
	for _, b := range ids {
		e, ok := t.Entry(b)
		if !ok || t.HeldBelow(e.Node, e.Group) {
			continue
		}
		if !t.prepareStore(b, true) {
			// Cannot happen: HoldNeed counted this copy within tier 1's room (free slots,
			// and candidates, which makeRoom drops at once with must), and the holds above
			// took no candidate it did not count (own). A failure here is a broken
			// invariant, with the hold half placed.
			panic(fmt.Sprintf("kvpage: broken invariant: Hold could not copy block %d that HoldNeed counted", b))
		}
		stored = append(stored, b)
		refs = t.holdSlots(refs, e.Node, e.Group)
	}
	if len(refs) == 0 {
		ts.holdFree = append(ts.holdFree, refs)
		return 0, stored, nil
	}
	if ts.holds == nil {
		ts.holds = make(map[HoldID][]gtHoldRef)
	}
	ts.nextHold++
	ts.holds[ts.nextHold] = refs
	return ts.nextHold, stored, nil
}

// holdSlots counts one more hold on every lower-tier slot of (n, g), taking each off its
// tier's eviction set.
func (t *GroupTree) holdSlots(refs []gtHoldRef, n Node, g int) []gtHoldRef {
	ts := t.tiers
	for i := range ts.lv {
		l := &ts.lv[i]
		s := l.at[int(n)*t.ng+g] - 1
		if s < 0 {
			continue
		}
		if l.candidate(s) {
			l.policy.Remove(s)
		}
		l.holds[s]++
		refs = append(refs, gtHoldRef{tier: uint8(i + 1), slot: s, gen: l.hgen[s]})
	}
	return refs
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
	refs, ok := ts.holds[h]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownHold, h)
	}
	delete(ts.holds, h)
	for _, r := range refs {
		l := &ts.lv[r.tier-1]
		if l.hgen[r.slot] != r.gen {
			continue // freed by a failed transfer or Clear since
		}
		if l.holds[r.slot]--; l.holds[r.slot] == 0 && l.candidate(r.slot) {
			l.addCandidate(r.slot)
		}
	}
	ts.holdFree = append(ts.holdFree, refs[:0])
	return nil
}

// HeldBlocks is the number of lower-tier slots hold h keeps now, over all tiers (0 for an
// ID that names no hold).
func (t *GroupTree) HeldBlocks(h HoldID) int {
	if t.tiers == nil {
		return 0
	}
	k := 0
	for _, r := range t.tiers.holds[h] {
		if t.tiers.lv[r.tier-1].hgen[r.slot] == r.gen {
			k++
		}
	}
	return k
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
	for h, refs := range ts.holds {
		for _, r := range refs {
			if r.tier == 0 || int(r.tier) > len(ts.lv) || r.slot < 0 || int(r.slot) >= len(counts[r.tier-1]) {
				return fmt.Errorf("hold %d names tier %d slot %d", h, r.tier, r.slot)
			}
			if ts.lv[r.tier-1].hgen[r.slot] == r.gen {
				counts[r.tier-1][r.slot]++
			}
		}
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
