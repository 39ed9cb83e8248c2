package prefix

import (
	"errors"
	"fmt"

	"github.com/kvpage/kvpage/blocks"
)

// Holds, for maintainers. A hold keeps the lower-tier copies of a prefix from eviction:
// it is how a sequence swapped out into the tiers (blocktable.Manager's Swap mode) keeps
// its KV until it resumes, as a host pool's blocks were kept. Hold copies into tier 1 the
// blocks of the prefix no lower tier holds yet and counts one hold on every entry of the
// prefix (tierEntry.holds); a held entry is no eviction candidate in any tier (candidate),
// so only a failed transfer (the server's word that the copy is bad) or Reset can take it.
// A hold names its entries with their generation: an entry freed by a failed store and
// made again since is not the one held, and ReleaseHold skips it.

// HoldID names one hold placed by Hold, until ReleaseHold.
type HoldID uint64

// ErrTierFull: tier 1 cannot take the copies a Hold needs (TierFullError says how many).
var ErrTierFull = errors.New("prefix: the lower tier has no room")

// ErrUnknownHold: ReleaseHold with an ID that names no hold.
var ErrUnknownHold = errors.New("prefix: unknown hold")

// TierFullError says how many tier-1 slots a Hold needed and how many tier 1 could give.
// It matches ErrTierFull.
type TierFullError struct {
	Requested, Available int
	// InFlight is how many of tier 1's slots copies in flight occupy and no hold keeps
	// (an Index's or a GroupTree's Hold counts them as it refuses: O(tier 1's capacity)):
	// slots receiving a copy, and slots a load or a copy down reads.
	// Each leaves that state when the server confirms its copy (CompleteTransfer), as a
	// free slot or an eviction candidate. So a caller can tell a refusal worth retrying
	// once its transfers complete (Requested <= Available+InFlight; vLLM's offloading
	// manager refuses a store that needs blocks still in flight, and its connector
	// retries) from a tier full of held copies, where only ReleaseHold makes room.
	// Under a write-back tier 2 Available counts free slots only, and a landed copy is a
	// candidate that must be copied down first: InFlight is then an upper bound.
	InFlight int
}

// Error says the counts (InFlight when there are any).
func (e *TierFullError) Error() string {
	if e.InFlight > 0 {
		return fmt.Sprintf("prefix: tier 1 has room for %d of the %d blocks to hold (%d more slots held by copies in flight)",
			e.Available, e.Requested, e.InFlight)
	}
	return fmt.Sprintf("prefix: tier 1 has room for %d of the %d blocks to hold", e.Available, e.Requested)
}

// Unwrap returns ErrTierFull.
func (e *TierFullError) Unwrap() error { return ErrTierFull }

// nextMark starts a pass that counts each device block once.
func (x *Index) nextMark() { x.tiers.nextMark(x.nb) }

// goodSlot reports whether the entry's slot in lower tier t holds a copy whose bytes are
// trusted (resident: a write-back's source stays resident until its copy lands) or is
// receiving one from a trusted source (pending). A slot a failed load hid (pending and
// leaving, dropped once its last copy ends) or doomed (slotDoomed: its copy reads the bad
// source) is no copy: a hold of it keeps nothing.
func (en *tierEntry) goodSlot(t Tier) bool {
	i := t - 1
	return en.st[i] == slotResident || en.st[i] == slotPending && !en.leaving[i]
}

// anyCopy reports whether some lower tier holds or is receiving a good copy of the entry
// (goodSlot).
func (en *tierEntry) anyCopy() bool {
	for i := range en.slot {
		if en.goodSlot(Tier(i + 1)) {
			return true
		}
	}
	return false
}

// HoldNeed reports, for the device blocks ids (a prefix's blocks, as Hold takes them),
// how many copies into tier 1 Hold would prepare (need: the cached blocks no lower tier
// holds or receives yet and that can be tiered, and each uncached block of the pool but the
// null block, which the caller will commit before Hold, since Hold refuses it) and how many tier 1 can take
// now (room: its free slots plus its eviction candidates other than the entries ids hold
// there). A block listed twice counts once; an ID outside the pool not at all. Without
// lower tiers both are 0. It changes nothing. A GroupTree's HoldNeed and Hold follow the
// same rules.
//
// The rule: Hold succeeds exactly when need <= room, and then prepares every copy it
// counted. A hold makes room in tier 1 only from victims whose loss loses no copy the
// tiers' write policies promise: tier 1 drops its victims at once when the tier below is
// not write-back (or there is none), so room is tier 1's free slots and candidates; under
// a write-back tier 2 a victim would have to be written down first, its slot free only
// once that copy lands, so room is tier 1's free slots alone, and a hold past them is
// refused (a scheduler then falls back to Recompute, or retries once tier 1's own
// write-backs have freed slots). No hold drops a cached block silently.
//
// A lower-tier slot a failed load hid (its bytes bad, dropped once the copies still
// reading it end) or doomed (a copy from such a slot, which lands nowhere) holds no copy:
// its block counts in need. When that slot is tier 1's, the copy has no slot until those
// copies end (one slot per block and tier), so room is at most need less such blocks,
// and Hold refuses until then rather than hold a copy that is not there.
func (x *Index) HoldNeed(ids []blocks.ID) (need, room int) {
	ts := x.tiers
	if ts == nil {
		return 0, 0
	}
	x.nextMark()
	own, busy := 0, 0
	for _, id := range ids {
		if uint(id) >= uint(x.nb) || ts.mark[id] == ts.markGen {
			continue
		}
		ts.mark[id] = ts.markGen
		if !x.IsCached(id) {
			if id != blocks.NullID || !x.pool.HasNullBlock() {
				need++ // the null block is never committed: no copy of it is made
			}
			continue
		}
		n := nodeOf(id)
		e := ts.devEnt[n] - 1
		if e >= 0 && ts.ents[e].anyCopy() {
			if ts.ents[e].candidate(1) {
				own++
			}
			continue
		}
		if !x.holdCopies(n) {
			continue // Hold leaves it as it is: no copy, whatever its slots
		}
		need++
		if e >= 0 && ts.ents[e].slot[0] != 0 {
			// Its tier-1 slot is a failed load's, busy until that load's other copies
			// end: the copy it needs has no slot until then.
			busy++
		}
	}
	return need, holdRoom(&ts.lv[0].slotLevel, x.lowerLevel(2), need, own, busy)
}

// holdRoom is both trees' HoldNeed room (Index.HoldNeed's rule): tier 1's free slots,
// plus its candidates other than the own the hold keeps there unless tier 2 (below, nil
// for none) is write-back (makeRoom's rule: no candidate is dropped for a hold), and at
// most need less the busy blocks whose tier-1 slot is a failed load's.
func holdRoom(l, below *slotLevel, need, own, busy int) int {
	room := len(l.free)
	if below == nil || below.spec.Write != WriteBack {
		room += l.policy.Len() - own
	}
	if busy > 0 {
		room = min(room, need-busy)
	}
	return room
}

// holdCopies reports whether Hold copies cached device node n, which no lower tier holds
// or receives: it can be tiered (not under a retired epoch) and it has an entry or can get
// one (newEntryFromNode refuses a key another entry holds: a 64-bit collision).
func (x *Index) holdCopies(n int32) bool {
	if !x.tierable(n) {
		return false
	}
	ts := x.tiers
	return ts.devEnt[n] != 0 || ts.byKey.find(x.nodes[n].key, ts.ents) < 0
}

// Hold keeps the lower-tier copies of the cached device blocks ids (a swapped-out
// sequence's prefix, which the caller still holds) until ReleaseHold: each block a lower
// tier holds or receives a good copy of already is held there (a slot a failed load hid,
// or the doomed copy from it, is none: HoldNeed), and each other one is copied into tier 1
// (TakePlans hands the copies out) and held once it lands; a block only the caller holds
// besides the index (RefCount 2) is marked demoted, so that it leaves the device once its copy is
// confirmed and the caller has released it. A held block is evicted from no tier; only a
// failed transfer of it (CompleteTransfer with ok false) or Reset drops it. Blocks that
// cannot be tiered (under a retired epoch, or a key collision) are left as they are. Room
// for the copies is made as HoldNeed says. It fails with *TierFullError (ErrTierFull) when
// HoldNeed's need exceeds its room, with ErrNoTiers without lower tiers, and with
// ErrNotCached in a *BlockError for an uncached block (the null block, a free block, an ID
// outside the pool: Hold takes cached blocks only, as a GroupTree's does), changing
// nothing. A hold of no block is HoldID 0, which ReleaseHold accepts.
func (x *Index) Hold(ids []blocks.ID) (HoldID, error) {
	ts := x.tiers
	if ts == nil {
		return 0, ErrNoTiers
	}
	for _, id := range ids {
		if !x.IsCached(id) {
			return 0, &BlockError{Op: "hold", ID: id, Err: ErrNotCached}
		}
	}
	if need, room := x.HoldNeed(ids); need > room {
		return 0, &TierFullError{Requested: need, Available: room, InFlight: x.InFlightSlots(1)}
	}
	x.beginTierEvents() // the slots dropped to make room: one event per tier
	defer x.flushTierEvents()
	refs := ts.newRefs()
	// First what the lower tiers hold already, so that making room for the copies below
	// cannot evict it; then the copies.
	x.nextMark()
	for _, id := range ids {
		n := nodeOf(id)
		if e := ts.devEnt[n] - 1; e >= 0 && ts.ents[e].anyCopy() && ts.mark[id] != ts.markGen {
			ts.mark[id] = ts.markGen
			refs = x.holdEntry(refs, e)
		}
	}
	for _, id := range ids {
		n := nodeOf(id)
		if ts.mark[id] == ts.markGen || !x.holdCopies(n) {
			continue
		}
		ts.mark[id] = ts.markGen
		// A block of the prefix the caller does not hold (the index's own copy, after a
		// duplicate commit) may be an eviction candidate: the copy pins it, so it leaves
		// the set first.
		if evictable(&x.nodes[n]) {
			x.evRemoveSlow(n)
		}
		if !x.startDeviceStore(n, x.pool.RefCount(id) == 2) {
			// Cannot happen: HoldNeed counted this copy within tier 1's room (free slots,
			// and candidates, which makeRoom drops at once, only when the tier below is
			// not write-back; none while a failed load's slot is the block's), the holds
			// above took no candidate it did not count (own), every live entry owns a
			// slot so a free entry is left, and holdCopies ruled out a key collision. A
			// failure here is a broken invariant, with the hold half placed.
			panic(fmt.Sprintf("kvpage: broken invariant: Hold could not copy block %d that HoldNeed counted", id))
		}
		refs = x.holdEntry(refs, ts.devEnt[n]-1)
	}
	h := ts.place(refs)
	x.mutated()
	return h, nil
}

// holdEntry counts one more hold on entry e, taking it off every tier's eviction set.
func (x *Index) holdEntry(refs []holdRef, e int32) []holdRef {
	ts := x.tiers
	en := &ts.ents[e]
	if en.holds == 0 {
		for i := range ts.lv {
			if t := Tier(i + 1); en.candidate(t) {
				ts.lv[i].policy.Remove(en.slot[i] - 1)
			}
		}
	}
	en.holds++
	return append(refs, holdRef{at: e, gen: en.gen})
}

// The Index's side of the book (tierholdbook.go): a ref names an entry.

func (x *Index) holdLive(r holdRef) bool {
	en := &x.tiers.ents[r.at]
	return en.live && en.gen == r.gen
}

func (x *Index) unhold(r holdRef) {
	en := &x.tiers.ents[r.at]
	if en.holds--; en.holds == 0 {
		for i := range x.tiers.lv {
			if t := Tier(i + 1); en.candidate(t) {
				x.tierAdd(t, r.at)
			}
		}
	}
}

// ReleaseHold ends hold h: its entries that no other hold keeps become eviction
// candidates again in their tiers. HoldID 0 is a no-op; an ID that names no hold fails
// with ErrUnknownHold (ErrNoTiers without lower tiers) and changes nothing.
func (x *Index) ReleaseHold(h HoldID) error {
	if h == 0 {
		return nil
	}
	ts := x.tiers
	if ts == nil {
		return ErrNoTiers
	}
	if err := ts.release(x, h); err != nil {
		return err
	}
	x.mutated()
	return nil
}

// HeldBlocks is the number of blocks hold h keeps in the lower tiers now (0 for an ID
// that names no hold).
func (x *Index) HeldBlocks(h HoldID) int {
	if x.tiers == nil {
		return 0
	}
	return x.tiers.heldBlocks(x, h)
}

// checkHolds verifies that every live entry counts exactly the holds that name it.
func (x *Index) checkHolds() error {
	ts := x.tiers
	counts := make(map[int32]int32)
	valid := func(r holdRef) bool { return r.at >= 0 && int(r.at) < len(ts.ents) }
	if err := ts.eachLive(x, valid, func(r holdRef) { counts[r.at]++ }); err != nil {
		return err
	}
	for e := range ts.ents {
		if en := &ts.ents[e]; en.holds != counts[int32(e)] || (!en.live && en.holds != 0) {
			return fmt.Errorf("entry %d counts %d holds, %d holds name it", e, en.holds, counts[int32(e)])
		}
	}
	return nil
}
