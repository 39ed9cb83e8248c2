package prefix

import (
	"math"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
)

// The lower tiers' books, for maintainers.
//
// A block that leaves the device is no longer a tree node (node b+1 is pool block b, and
// the block is reused), so the lower tiers keep their own entries, not keyed by any pool
// block ID: an entry is keyed by the block's chained key (the table key of the tree,
// which folds in the namespace, the epoch and every token of the path) and verified, as
// the tree verifies a child, by its tokens and its parent's key. A lookup that stops on
// the device continues from the last device block's key into the entries, block by block,
// so an evicted prefix is found again in host memory, then on disk. The hybrid tree
// (issue 15) will key the same store by (key, group): the key already names the path,
// and a group index beside it is all an entry lacks.
//
// Each lower tier has its slots (0..Capacity-1, what plans name), an owner per slot, a
// free list that hands out the lowest slots first (so that copies coalesce), and its own
// eviction policy from package evict over its slots. A slot is pending while a copy into
// it is in flight, then resident. A slot is an eviction candidate when it is resident, no
// copy reads it (pins), no hold keeps it (tierhold.go) and it is not leaving: a leaving
// slot is dropped when its last pin goes (a write-back to the tier below, or a failed
// load, marks it so). Lower tiers
// evict any candidate, not only leaves: a block whose parent left every tier cannot be
// reached, and its tier's policy ages it out.
//
// An entry lives while a lower tier holds or is receiving it. devEnt links a device
// node to its entry, if it has one; devRefs counts the pool references in-flight copies
// hold on device blocks (the source of a store, the destination of a load), which the
// pool and the Manager's invariants see as holders: a device block being copied is never
// evicted or reused. Blocks with multimodal extra keys are not tiered (an entry stores no
// extra keys to verify them with).

// Slot states of an entry in a lower tier.
const (
	slotNone uint8 = iota
	slotPending
	slotResident
	// slotDoomed is a pending slot whose copy reads a source a failed load found bad
	// since (failSlot): when that copy completes, whatever the server reports, the slot
	// is dropped, not made resident. It counts as pending.
	slotDoomed
)

const lowerTiers = MaxTiers - 1

type tierEntry struct {
	key, parent uint64 // chained key and the parent's key
	ns          Namespace
	dev         int32 // device node holding the block, 0 for none
	hits        uint32
	first       bool               // the first block of its namespace (no parent hash in events)
	slot        [lowerTiers]int32  // slot+1 in each lower tier, 0 for none
	st          [lowerTiers]uint8  // slotNone, slotPending, slotResident, slotDoomed
	pins        [lowerTiers]int32  // in-flight copies reading the slot
	leaving     [lowerTiers]bool   // drop the slot when its last pin goes
	touched     [lowerTiers]uint64 // last access in the tier, for its policy
	live        bool
	// holds counts the holds on the entry (tierhold.go): a held entry is no eviction
	// candidate in any tier. gen counts the entry's reuses, so that a hold never releases
	// an entry freed and made again since.
	holds int32
	gen   uint32
	// mmh is the hash of the block's multimodal extra keys (mmHash; 0 for none), which a
	// lookup verifies as it verifies tokens: 8 bytes, whatever the inputs' identifiers.
	mmh uint64
}

type tierLevel struct {
	slotLevel
	owner []int32 // slot -> entry+1
}

type tierStore struct {
	cfg   TierConfig
	lv    []tierLevel // lv[t-1] is tier t
	ents  []tierEntry
	toks  []int32 // bs tokens per entry
	hash  []byte  // per entry, its event hash then its parent's (only with an observer)
	hs    int
	freeE []int32
	byKey entryTable // live entries by chained key (tiertable.go)

	devEnt  []int32 // per device node: entry+1, 0 for none
	devRefs []int32 // per device block: pool references held by in-flight copies

	planBook
	evIDs    []blocks.ID  // scratch of lower-tier events
	slotBuf  []int32      // scratch of matchSlots
	walkBuf  []tierOp     // scratch of PrepareLoad
	hitQueue []hitMark    // blocks that reached WriteAfterHits' threshold (tierdevice.go)
	follow   []followMark // demoted parents an eviction pass ranked first (demotedLeft)
	demoting int          // device blocks being demoted (flagDemote)
	stats    [MaxTiers]TierStats

	// PeekLower's last walk, for PrepareLoad (tierlookup.go); gen changes whenever an
	// entry is made or freed, an epoch is bumped or the tiers reset: a walk kept from
	// before may then find other entries, and is not used.
	peek lowerPeek
	gen  uint64

	holdBook            // holds of swapped-out prefixes (tierhold.go)
	ev       tierEvents // lower-tier events collected within CompleteTransfer (tierplan.go)
}

func (x *Index) initTiers(c *TierConfig) error {
	if err := c.validate(); err != nil {
		return err
	}
	// A plan's Bytes is its blocks times BlockBytes, and a plan holds at most a tier's
	// capacity (a store) or the pool's blocks (a load): bound BlockBytes so it cannot wrap.
	most := int64(x.nb)
	for _, s := range c.Tiers {
		most = max(most, int64(s.Capacity))
	}
	if most > 0 && c.BlockBytes > math.MaxInt64/most {
		return &SizeError{What: "block bytes", N: c.BlockBytes, Max: math.MaxInt64 / most}
	}
	if c.FreeTarget > x.pool.Capacity() {
		return &SizeError{What: "free target", N: int64(c.FreeTarget), Max: int64(x.pool.Capacity())}
	}
	ts := &tierStore{cfg: *c, planBook: newPlanBook()}
	ts.cfg.Tiers = append([]TierSpec(nil), c.Tiers...)
	total := 0
	for _, s := range ts.cfg.Tiers {
		sl, err := newSlotLevel(s, x.clock)
		if err != nil {
			return err
		}
		ts.lv = append(ts.lv, tierLevel{slotLevel: sl, owner: make([]int32, s.Capacity)})
		total += s.Capacity
	}
	// Every live entry owns a lower-tier slot, and a new one waits for its slot only
	// within startDeviceStore: one entry more than the slots.
	total++
	ts.ents = make([]tierEntry, total)
	ts.byKey.init(total)
	ts.toks = make([]int32, total*x.bs)
	ts.freeE = make([]int32, total)
	for i := range ts.freeE {
		ts.freeE[i] = int32(total - 1 - i)
	}
	if x.obs != nil {
		ts.hs = x.hashSize
		ts.hash = make([]byte, total*2*x.hashSize)
	}
	ts.devEnt = make([]int32, x.nb+1)
	ts.devRefs = make([]int32, x.nb)
	x.tiers = ts
	return nil
}

// NumTiers is the number of tiers, Device included (1 without WithTiers).
func (x *Index) NumTiers() int {
	if x.tiers == nil {
		return 1
	}
	return 1 + len(x.tiers.lv)
}

// TierStatsOf returns tier t's counters (the zero value for a tier the index lacks).
func (x *Index) TierStatsOf(t Tier) TierStats {
	if x.tiers == nil || int(t) >= x.NumTiers() {
		return TierStats{}
	}
	s := x.tiers.stats[t]
	if t == Device {
		s.Resident = x.cached
		s.Pending = x.tiers.demoting
	} else {
		l := &x.tiers.lv[t-1]
		s.Resident, s.Pending = l.resident, l.pending
	}
	return s
}

// TransferRefs is the number of pool references in-flight copies hold on device block id.
func (x *Index) TransferRefs(id blocks.ID) int {
	if x.tiers == nil || id < 0 || int(id) >= x.nb {
		return 0
	}
	return int(x.tiers.devRefs[id])
}

func (ts *tierStore) entryTokens(e int32, bs int) []int32 {
	off := int(e) * bs
	return ts.toks[off : off+bs : off+bs]
}

// findEntry returns the entry of key whose parent key and tokens are these, or -1. The
// caller checks its multimodal keys' hash (tierEntry.mmh) too: kept out of here, so that
// this stays small enough to inline into the lookup's loop.
func (x *Index) findEntry(key, parent uint64, toks []int32) int32 {
	e := x.tiers.byKey.find(key, x.tiers.ents)
	if e < 0 {
		return -1
	}
	en := &x.tiers.ents[e]
	if en.parent != parent || !sameTokens(x.tiers.entryTokens(e, x.bs), toks) {
		return -1
	}
	return e
}

// mmHash is what a tier entry keeps of a block's multimodal extra keys mm to verify
// lookups with: their hash, never 0, or 0 for a block without any. A 64-bit collision
// between two blocks of the same chained key, parent and tokens is what it risks.
func (x *Index) mmHash(mm []mmKey) uint64 {
	if len(mm) == 0 {
		return 0
	}
	return x.mixMM(0x9e3779b97f4a7c15, mm) | 1
}

// nodeMMHash is mmHash of device node n's multimodal keys.
func (x *Index) nodeMMHash(n int32) uint64 {
	if x.nodes[n].flags&flagMM == 0 {
		return 0
	}
	return x.mmHash(x.mm[n])
}

// nodeEntry returns the entry of device node n's block (its key, parent key, tokens and
// multimodal keys' hash), or -1. It probes before it reads the rest: most committed blocks
// have no entry.
func (x *Index) nodeEntry(n int32) int32 {
	nd := &x.nodes[n]
	e := x.tiers.byKey.find(nd.key, x.tiers.ents)
	if e < 0 {
		return -1
	}
	en := &x.tiers.ents[e]
	if en.parent != x.nodes[nd.parent].key || en.mmh != x.nodeMMHash(n) || !sameTokens(x.tiers.entryTokens(e, x.bs), x.blockTokens(n)) {
		return -1
	}
	return e
}

// newEntryFromNode makes the entry of device node n, or returns -1 when the store is full
// of entries or another block holds its key (a 64-bit collision: the block is not tiered).
func (x *Index) newEntryFromNode(n int32) int32 {
	ts := x.tiers
	nd := &x.nodes[n]
	if len(ts.freeE) == 0 || ts.byKey.find(nd.key, ts.ents) >= 0 {
		return -1
	}
	e := ts.freeE[len(ts.freeE)-1]
	ts.freeE = ts.freeE[:len(ts.freeE)-1]
	p := nd.parent
	r := p
	for x.isBlock(r) {
		r = x.nodes[r].parent
	}
	ts.ents[e] = tierEntry{key: nd.key, parent: x.nodes[p].key, ns: x.root(r).ns, dev: n, hits: x.nodes[n].hits, first: !x.isBlock(p), live: true, gen: ts.ents[e].gen, mmh: x.nodeMMHash(n)}
	copy(ts.entryTokens(e, x.bs), x.blockTokens(n))
	if ts.hash != nil {
		off := int(e) * 2 * ts.hs
		buf := x.appendHash(ts.hash[off:off], n)
		x.appendHash(buf, p)
	}
	ts.byKey.insert(e, nd.key)
	ts.gen++
	ts.devEnt[n] = e + 1
	return e
}

// freeEntryIfEmpty frees entry e once no lower tier holds or receives it: a block only
// the device holds needs no entry (its device link goes too), so that live entries
// never outnumber the lower tiers' slots.
func (ts *tierStore) freeEntryIfEmpty(e int32) {
	if ts.ents[e].slot != [lowerTiers]int32{} {
		return // the common case (a device eviction of a block a lower tier holds), inlined
	}
	ts.freeEntry(e)
}

// freeEntry frees entry e, which no lower tier holds or receives.
func (ts *tierStore) freeEntry(e int32) {
	en := &ts.ents[e]
	if en.dev != 0 {
		ts.devEnt[en.dev] = 0
	}
	ts.byKey.remove(e, en.key)
	ts.gen++
	*en = tierEntry{gen: en.gen + 1}
	ts.freeE = append(ts.freeE, e)
}

// candidate reports whether entry e's slot in lower tier t (1-based) is evictable.
func (en *tierEntry) candidate(t Tier) bool {
	i := t - 1
	return en.st[i] == slotResident && en.pins[i] == 0 && !en.leaving[i] && en.holds == 0
}

func (x *Index) tierAdd(t Tier, e int32) {
	ts := x.tiers
	en := &ts.ents[e]
	ts.lv[t-1].policy.Add(evict.Entry{Key: en.slot[t-1] - 1, LastAccess: en.touched[t-1], Hits: en.hits})
}

// reserve takes a slot of lower tier t for entry e (pending), making room if it has to
// (makeRoom).
func (x *Index) reserve(t Tier, e int32) bool {
	ts := x.tiers
	l := &ts.lv[t-1]
	if len(l.free) == 0 && !makeRoom(x, t) {
		return false
	}
	s := l.take()
	l.owner[s] = e + 1
	en := &ts.ents[e]
	en.slot[t-1], en.st[t-1], en.leaving[t-1], en.pins[t-1] = s+1, slotPending, false, 0
	return true
}

// Index's side of makeRoom (tierroom.go): a slot's owner is an entry.

func (x *Index) lowerLevel(t Tier) *slotLevel {
	if int(t) > len(x.tiers.lv) {
		return nil
	}
	return &x.tiers.lv[t-1].slotLevel
}

func (x *Index) victimBelow(t Tier, k int32) uint8 {
	ts := x.tiers
	en := &ts.ents[ts.lv[t-1].owner[k]-1]
	switch {
	case en.slot[t] == 0:
		return belowNone
	case en.goodSlot(t + 1):
		return belowGood
	}
	return belowBad
}

func (x *Index) keepVictim(t Tier, k int32) { x.tierAdd(t, x.tiers.lv[t-1].owner[k]-1) }

func (x *Index) writeDown(t Tier, k int32) bool {
	ts := x.tiers
	e := ts.lv[t-1].owner[k] - 1
	if !x.reserve(t+1, e) {
		return false
	}
	en := &ts.ents[e]
	en.pins[t-1]++
	en.leaving[t-1] = true
	ts.queue = append(ts.queue, tierOp{from: t, to: t + 1, e: e, src: k, dst: en.slot[t] - 1})
	return true
}

func (x *Index) dropVictim(t Tier, k int32) { x.dropSlot(t, x.tiers.lv[t-1].owner[k]-1) }

// dropSlot drops entry e's slot in lower tier t (the caller has taken it off the policy
// if it was a candidate), and frees the entry if nothing else holds it.
func (x *Index) dropSlot(t Tier, e int32) {
	ts := x.tiers
	l := &ts.lv[t-1]
	en := &ts.ents[e]
	s := en.slot[t-1] - 1
	if en.st[t-1] == slotResident {
		x.slotEvicted(t, s)
	}
	l.owner[s] = 0
	l.put(s, en.st[t-1] == slotResident)
	en.slot[t-1], en.st[t-1], en.pins[t-1], en.leaving[t-1] = 0, slotNone, 0, false
	ts.freeEntryIfEmpty(e)
}

// heldBelow reports whether a tier below t holds entry e.
func (en *tierEntry) heldBelow(t Tier) bool {
	for i := int(t); i < lowerTiers; i++ {
		if en.st[i] == slotResident {
			return true
		}
	}
	return false
}

// pinSlot marks one more copy reading entry e's slot in lower tier t.
func (x *Index) pinSlot(t Tier, e int32) {
	en := &x.tiers.ents[e]
	if en.candidate(t) {
		x.tiers.lv[t-1].policy.Remove(en.slot[t-1] - 1)
	}
	en.pins[t-1]++
}

// unpinSlot ends one copy reading entry e's slot in lower tier t.
func (x *Index) unpinSlot(t Tier, e int32) {
	en := &x.tiers.ents[e]
	if en.pins[t-1]--; en.pins[t-1] > 0 {
		return
	}
	if en.leaving[t-1] {
		x.dropSlot(t, e)
		return
	}
	if en.candidate(t) {
		x.tierAdd(t, e)
	}
}

// slotResidentNow turns entry e's pending slot in lower tier t resident after a confirmed
// copy, and starts a write-through copy into the tier below.
func (x *Index) slotResidentNow(t Tier, e int32) {
	ts := x.tiers
	l := &ts.lv[t-1]
	en := &ts.ents[e]
	en.st[t-1] = slotResident
	en.touched[t-1] = x.clock.Now()
	l.landed()
	if x.obs != nil {
		x.emitTierStored(t, e, en.slot[t-1]-1)
	}
	below := t + 1
	if int(below) <= len(ts.lv) && ts.lv[below-1].spec.Write == WriteThrough && en.slot[below-1] == 0 && x.reserve(below, e) {
		en = &ts.ents[e]
		en.pins[t-1]++
		ts.queue = append(ts.queue, tierOp{from: t, to: below, e: e, src: en.slot[t-1] - 1, dst: en.slot[below-1] - 1})
	}
	if en.candidate(t) {
		x.tierAdd(t, e)
	}
}

// Index's side of the failed-copy rules (tierslot.go): a slot's state is its entry's.

func (x *Index) slotOf(t Tier, k int32) slotView {
	en := &x.tiers.ents[x.tiers.lv[t-1].owner[k]-1]
	i := t - 1
	return slotView{st: &en.st[i], leaving: &en.leaving[i], pins: &en.pins[i], touched: &en.touched[i]}
}

func (x *Index) slotBelow(t Tier, k int32) (slotView, bool) {
	en := &x.tiers.ents[x.tiers.lv[t-1].owner[k]-1]
	if int(t) >= len(x.tiers.lv) || en.slot[t] == 0 {
		return slotView{}, false
	}
	return slotView{st: &en.st[t], leaving: &en.leaving[t], pins: &en.pins[t], touched: &en.touched[t]}, true
}

func (x *Index) slotTime() uint64 { return x.clock.Now() }

func (x *Index) slotEvicted(t Tier, k int32) {
	ts := x.tiers
	e := ts.lv[t-1].owner[k] - 1
	ts.stats[t].Evicted++
	if !ts.ents[e].heldBelow(t) {
		ts.stats[t].Lost++
	}
	if x.obs != nil {
		x.emitTierRemoved(t, e, k)
	}
}

// bestTier is the fastest lower tier where entry e is resident, or 0. A leaving slot
// still holds the block until its last copy ends, so it still serves loads: a block
// confirmed stored can be loaded until its tier reports it removed.
func (en *tierEntry) bestTier() Tier {
	for i := 0; i < lowerTiers; i++ {
		if en.st[i] == slotResident {
			return Tier(i + 1)
		}
	}
	return 0
}

// resetTiers drops every lower tier's blocks (Reset; no transfer is in flight).
func (x *Index) resetTiers() {
	ts := x.tiers
	for i := range ts.lv {
		l := &ts.lv[i]
		clear(l.owner)
		l.reset()
	}
	for e := range ts.ents {
		ts.ents[e] = tierEntry{gen: ts.ents[e].gen + 1} // every hold lapses
	}
	ts.freeE = ts.freeE[:0]
	for e := len(ts.ents) - 1; e >= 0; e-- {
		ts.freeE = append(ts.freeE, int32(e))
	}
	ts.byKey.clear()
	ts.gen++
	clear(ts.devEnt)
	ts.hitQueue = ts.hitQueue[:0]
	ts.demoting = 0 // Reset dropped every device block, flagged ones too
}
