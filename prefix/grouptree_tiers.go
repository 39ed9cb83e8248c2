package prefix

import (
	"fmt"
	"math"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
)

// Lower tiers of a GroupTree (SetTiers), for maintainers.
//
// A lower tier holds at most one copy per (node, group): at[node*groups+group] is its
// slot+1, and per slot the tier keeps the (node, group) it holds and the copy's state, as
// an Index's tiers keep per entry (tierstore.go): pending while a copy into it is in
// flight, then resident; pins count the copies reading it; a leaving slot is dropped when
// its last pin goes. The slots' free list, policy and counts are the slotLevel every
// lower tier shares, and the transfers are the planBook an Index's tiers use, so that
// both trees hand out the same Plans and coalesce them the same way.
//
// The tree's nodes already name their prefixes (tokens verified on every step), so the
// lower tiers need no key store of their own: a slot counts as one of its node's
// entries, and a node stays while any tier holds or receives an entry for it. A lookup
// reads the device's lists first (First) and LowerTier where they stop.
//
// The tree holds no references: the owner (blocktable/hybrid) retains a device block for
// every copy that reads or fills it (PrepareStore, PrepareLoad) and releases it when
// CompleteTransfer hands it back; devRefs counts them, for the owner's invariants. The
// device's write policies (write-through on commit, after N hits, write-back ahead of
// need) are the owner's: it sees the free queue and the hits. The copies between lower
// tiers (write-back when a tier evicts, write-through when a copy lands) are the tree's.
type gtierStore struct {
	cfg TierConfig
	lv  []gtierLevel // lv[t-1] is tier t
	planBook
	clock    evict.Counter
	devRefs  []int32  // per device block: in-flight copies holding it
	devHits  []uint32 // per device block: its uses on the device, as the owner counts them (SetDeviceHits)
	stats    [MaxTiers]TierStats
	slotBuf  []int32
	nodeBuf  []Node
	grpBuf   []uint8
	stBuf    []uint8
	ev       gtierEvents // lower-tier events collected in a batch (grouptree_tierevents.go)
	holdBook             // holds of swapped-out sequences (grouptree_tierhold.go)
}

// gtierLevel is one lower tier of a GroupTree.
type gtierLevel struct {
	slotLevel
	at      []int32 // per (node, group): slot+1, 0 for none
	node    []Node  // per slot: the node it holds, 0 for a free slot
	group   []uint8
	st      []uint8 // slotNone, slotPending, slotResident, slotDoomed
	pins    []int32 // copies in flight reading the slot
	leaving []bool  // drop the slot when its last pin goes
	touched []uint64
	hits    []uint32 // per slot: its content's uses, its device uses when stored and one per load (evict.Entry.Hits)
	holds   []int32  // holds on the slot (grouptree_tierhold.go): no eviction candidate
	hgen    []uint32 // bumped when the slot is freed, so that a stale hold names it no more
}

// SetTiers gives the tree the lower tiers of c (host, disk, a user's own), each with its
// capacity in blocks and its eviction policy: an entry a tier holds keeps its node, so
// that a prefix evicted from the device is found again there (LowerTier) and loaded
// (PrepareLoad). The tree moves no bytes: TakePlans returns the copies, CompleteTransfer
// confirms them. It must be called before the tree has a node (else ErrInvalidArgument,
// changing nothing), and fails as prefix.WithTiers does for a bad configuration.
func (t *GroupTree) SetTiers(c TierConfig) error {
	if t.live != 0 || len(t.nodes) != 1 {
		return fmt.Errorf("%w: SetTiers on a tree that has nodes", ErrInvalidArgument)
	}
	if err := c.validate(); err != nil {
		return err
	}
	nb := len(t.res[Device].ent)
	most := int64(nb)
	for _, s := range c.Tiers {
		most = max(most, int64(s.Capacity))
	}
	if c.BlockBytes > math.MaxInt64/most {
		return &SizeError{What: "block bytes", N: c.BlockBytes, Max: math.MaxInt64 / most}
	}
	ts := &gtierStore{cfg: c, planBook: newPlanBook(), devRefs: make([]int32, nb), devHits: make([]uint32, nb)}
	ts.cfg.Tiers = append([]TierSpec(nil), c.Tiers...)
	for _, s := range ts.cfg.Tiers {
		sl, err := newSlotLevel(s, &ts.clock)
		if err != nil {
			return err
		}
		n := s.Capacity
		ts.lv = append(ts.lv, gtierLevel{slotLevel: sl, at: make([]int32, t.ng, cap(t.nodes)*t.ng),
			node: make([]Node, n), group: make([]uint8, n), st: make([]uint8, n), pins: make([]int32, n),
			leaving: make([]bool, n), touched: make([]uint64, n), hits: make([]uint32, n), holds: make([]int32, n), hgen: make([]uint32, n)})
	}
	t.tiers = ts
	t.extras = true
	return nil
}

// addNode grows the lower tiers' per-(node, group) slots with a node.
func (ts *gtierStore) addNode(groups int) {
	for i := range ts.lv {
		for range groups {
			ts.lv[i].at = append(ts.lv[i].at, 0)
		}
	}
}

// NumTiers is the number of tiers, Device included (1 without SetTiers).
func (t *GroupTree) NumTiers() int {
	if t.tiers == nil {
		return 1
	}
	return 1 + len(t.tiers.lv)
}

// LowerTier returns the fastest lower tier holding group g's block at node n (resident:
// its copy confirmed, and not leaving after a failed load), or Device (0) when none does
// or the tree has no lower tiers.
func (t *GroupTree) LowerTier(n Node, g int) Tier {
	ts := t.tiers
	if ts == nil || uint(g) >= uint(t.ng) {
		return Device
	}
	i := int(n)*t.ng + g
	for k := range ts.lv {
		l := &ts.lv[k]
		if uint(i) >= uint(len(l.at)) {
			return Device
		}
		if s := l.at[i]; s != 0 && l.st[s-1] == slotResident {
			return Tier(k + 1)
		}
	}
	return Device
}

// HeldBelow reports whether a lower tier holds group g's block at node n or is receiving
// it (a store in flight). A slot a failed load hid (its bytes bad, dropped once the
// copies still reading it end) holds nothing, and a copy from such a slot (doomed: it
// lands nowhere) receives nothing.
func (t *GroupTree) HeldBelow(n Node, g int) bool {
	ts := t.tiers
	if ts == nil || uint(g) >= uint(t.ng) {
		return false
	}
	i := int(n)*t.ng + g
	for k := range ts.lv {
		if l := &ts.lv[k]; uint(i) < uint(len(l.at)) && l.at[i] != 0 && l.good(l.at[i]-1) {
			return true
		}
	}
	return false
}

// good reports whether slot s holds a copy whose bytes are trusted (resident: a
// write-back's source stays resident until its copy lands) or is receiving one from a
// trusted source (pending, neither hidden by a failed load nor doomed), as an Index's
// tierEntry.goodSlot.
func (l *gtierLevel) good(s int32) bool {
	return l.st[s] == slotResident || l.st[s] == slotPending && !l.leaving[s]
}

// tier1Busy reports whether tier 1 has a slot of (n, g) that is no copy (HeldBelow): a
// failed load's, busy until the copies reading it end. No copy of (n, g) can go into
// tier 1 until then.
func (t *GroupTree) tier1Busy(n Node, g int) bool {
	l := &t.tiers.lv[0]
	i := int(n)*t.ng + g
	return uint(i) < uint(len(l.at)) && l.at[i] != 0 && !l.good(l.at[i]-1)
}

// TransferRefs is the number of in-flight copies holding device block b: the owner holds
// one reference on b for each (PrepareStore, PrepareLoad) until CompleteTransfer.
func (t *GroupTree) TransferRefs(b blocks.ID) int {
	if t.tiers == nil || uint(b) >= uint(len(t.tiers.devRefs)) {
		return 0
	}
	return int(t.tiers.devRefs[b])
}

// PendingTransfers is the number of transfers prepared and not yet completed (each store
// not yet handed out in a plan counted on its own).
func (t *GroupTree) PendingTransfers() int {
	if t.tiers == nil {
		return 0
	}
	return t.tiers.pending()
}

// TierStatsOf returns tier tier's counters (the zero value for a tier the tree lacks).
// The device's Resident is its entries over all groups, its Evicted and Lost what the
// owner counted (CountDeviceEviction), Lost also the blocks of failed stream-ordered
// stores the owner evicted while their copy was in flight (CompleteTransfer); its Pending
// is the owner's to count (blocks being demoted), and is 0 here.
func (t *GroupTree) TierStatsOf(tier Tier) TierStats {
	if t.tiers == nil || int(tier) >= t.NumTiers() {
		return TierStats{}
	}
	s := t.tiers.stats[tier]
	if tier == Device {
		for _, c := range t.res[Device].cached {
			s.Resident += c
		}
		return s
	}
	l := &t.tiers.lv[tier-1]
	s.Resident, s.Pending = l.resident, l.pending
	return s
}

// TierMedium returns tier tier's medium (MediumGPU for the device, "" for a tier the tree
// lacks).
func (t *GroupTree) TierMedium(tier Tier) string {
	if tier == Device {
		return MediumGPU
	}
	if t.tiers == nil || int(tier) >= t.NumTiers() {
		return ""
	}
	return t.tiers.lv[tier-1].spec.Medium
}

// TierConfig returns the configuration SetTiers was given, and whether it was.
func (t *GroupTree) TierConfig() (TierConfig, bool) {
	if t.tiers == nil {
		return TierConfig{}, false
	}
	return t.tiers.cfg, true
}

// CountDeviceEviction counts device block b, cached and about to be evicted by the
// owner, in the device's TierStats: Evicted, and Lost when no lower tier holds its entry.
// (The owner counts, not Uncache: an eviction costs one check less without tiers.)
func (t *GroupTree) CountDeviceEviction(b blocks.ID) {
	ts := t.tiers
	e, ok := t.Entry(b)
	if ts == nil || !ok {
		return
	}
	ts.stats[Device].Evicted++
	if t.LowerTier(e.Node, e.Group) == Device && !t.storeInFlight(e.Node, e.Group) {
		ts.stats[Device].Lost++
	}
}

// storeInFlight reports whether (n, g)'s copy into tier 1 is in flight with its device
// source released already (TierConfig.StreamOrdered): a demoted block evicted then is not
// lost, as an Index's tiers count it.
func (t *GroupTree) storeInFlight(n Node, g int) bool {
	ts := t.tiers
	if !ts.cfg.StreamOrdered {
		return false
	}
	l := &ts.lv[0]
	s := l.at[int(n)*t.ng+g] - 1
	return s >= 0 && l.st[s] == slotPending && !l.leaving[s]
}

// reserveSlot takes a slot of lower tier tier for (n, g), pending, making room if it
// has to (makeRoom); n is live and kept by an entry (the copy's source), so making room
// cannot free it.
func (t *GroupTree) reserveSlot(tier Tier, n Node, g int) (int32, bool) {
	l := &t.tiers.lv[tier-1]
	if len(l.free) == 0 && !makeRoom(t, tier) {
		return -1, false
	}
	s := l.take()
	l.at[int(n)*t.ng+g] = s + 1
	l.node[s], l.group[s], l.st[s], l.pins[s], l.leaving[s] = n, uint8(g), slotPending, 0, false
	t.nodes[n].entries++
	return s, true
}

// GroupTree's side of makeRoom (tierroom.go): a slot holds a (node, group).

func (t *GroupTree) lowerLevel(tier Tier) *slotLevel {
	if int(tier) > len(t.tiers.lv) {
		return nil
	}
	return &t.tiers.lv[tier-1].slotLevel
}

func (t *GroupTree) victimBelow(tier Tier, k int32) uint8 {
	l := &t.tiers.lv[tier-1]
	below := &t.tiers.lv[tier]
	switch d := below.at[int(l.node[k])*t.ng+int(l.group[k])] - 1; {
	case d < 0:
		return belowNone
	case below.good(d):
		return belowGood
	}
	return belowBad
}

func (t *GroupTree) keepVictim(tier Tier, k int32) { t.tiers.lv[tier-1].addCandidate(k) }

func (t *GroupTree) writeDown(tier Tier, k int32) bool {
	ts := t.tiers
	l := &ts.lv[tier-1]
	d, ok := t.reserveSlot(tier+1, l.node[k], int(l.group[k]))
	if !ok {
		return false
	}
	l.pins[k]++
	l.leaving[k] = true
	ts.queue = append(ts.queue, tierOp{from: tier, to: tier + 1, src: k, dst: d})
	return true
}

func (t *GroupTree) dropVictim(tier Tier, k int32) { t.dropSlot(tier, k) }

// dropSlot frees slot s of lower tier tier (off the policy already, if it was a
// candidate) and the node, with the ancestors nothing keeps, if nothing else keeps it.
func (t *GroupTree) dropSlot(tier Tier, s int32) {
	ts := t.tiers
	l := &ts.lv[tier-1]
	n, g := l.node[s], int(l.group[s])
	res := l.st[s] == slotResident
	if res {
		t.slotEvicted(tier, s)
	}
	l.put(s, res)
	l.at[int(n)*t.ng+g] = 0
	l.node[s], l.group[s], l.st[s], l.pins[s], l.leaving[s] = 0, 0, slotNone, 0, false
	l.holds[s], l.hits[s] = 0, 0
	l.hgen[s]++
	t.nodes[n].entries--
	t.maybeFree(n)
}

// residentBelow reports whether a tier below tier holds (n, g).
func (t *GroupTree) residentBelow(tier Tier, n Node, g int) bool {
	ts := t.tiers
	for k := int(tier); k < len(ts.lv); k++ {
		if s := ts.lv[k].at[int(n)*t.ng+g]; s != 0 && ts.lv[k].st[s-1] == slotResident {
			return true
		}
	}
	return false
}

func (l *gtierLevel) candidate(s int32) bool {
	return l.st[s] == slotResident && l.pins[s] == 0 && !l.leaving[s] && l.holds[s] == 0
}

func (l *gtierLevel) addCandidate(s int32) {
	l.policy.Add(evict.Entry{Key: s, LastAccess: l.touched[s], Hits: l.hits[s]})
}

// pinSlot marks one more copy reading slot s of lower tier tier.
func (t *GroupTree) pinSlot(tier Tier, s int32) {
	l := &t.tiers.lv[tier-1]
	if l.candidate(s) {
		l.policy.Remove(s)
	}
	l.pins[s]++
}

// unpinSlot ends one copy reading slot s of lower tier tier.
func (t *GroupTree) unpinSlot(tier Tier, s int32) {
	l := &t.tiers.lv[tier-1]
	if l.pins[s]--; l.pins[s] > 0 {
		return
	}
	if l.leaving[s] {
		t.dropSlot(tier, s)
		return
	}
	if l.candidate(s) {
		l.addCandidate(s)
	}
}

// slotResidentNow turns pending slot s of lower tier tier resident after a confirmed copy
// of content used hits times, reports it, and starts a write-through copy into the tier
// below.
func (t *GroupTree) slotResidentNow(tier Tier, s int32, hits uint32) {
	ts := t.tiers
	l := &ts.lv[tier-1]
	n, g := l.node[s], int(l.group[s])
	l.st[s] = slotResident
	l.touched[s] = ts.clock.Tick()
	l.hits[s] = hits
	l.landed()
	if t.ev != nil {
		t.tierStored(tier, s, n, g)
	}
	below := tier + 1
	if int(below) <= len(ts.lv) && ts.lv[below-1].spec.Write == WriteThrough && ts.lv[below-1].at[int(n)*t.ng+g] == 0 {
		if d, ok := t.reserveSlot(below, n, g); ok {
			l.pins[s]++
			ts.queue = append(ts.queue, tierOp{from: tier, to: below, src: s, dst: d})
		}
	}
	if l.candidate(s) {
		l.addCandidate(s)
	}
}

// GroupTree's side of the failed-copy rules (tierslot.go): a slot's state is its level's.

func (t *GroupTree) slotOf(tier Tier, s int32) slotView {
	l := &t.tiers.lv[tier-1]
	return slotView{st: &l.st[s], leaving: &l.leaving[s], pins: &l.pins[s], touched: &l.touched[s]}
}

func (t *GroupTree) slotBelow(tier Tier, s int32) (slotView, bool) {
	ts := t.tiers
	if int(tier) >= len(ts.lv) {
		return slotView{}, false
	}
	l, below := &ts.lv[tier-1], &ts.lv[tier]
	d := below.at[int(l.node[s])*t.ng+int(l.group[s])] - 1
	if d < 0 {
		return slotView{}, false
	}
	return t.slotOf(tier+1, d), true
}

func (t *GroupTree) slotTime() uint64 { return t.tiers.clock.Tick() }

func (t *GroupTree) slotEvicted(tier Tier, s int32) {
	ts := t.tiers
	l := &ts.lv[tier-1]
	n, g := l.node[s], int(l.group[s])
	ts.stats[tier].Evicted++
	if !t.residentBelow(tier, n, g) {
		ts.stats[tier].Lost++
	}
	if t.ev != nil {
		t.tierRemoved(tier, s, n, g)
	}
}

// clearTiers drops every lower tier's entries (Clear; no transfer is in flight, so every
// slot is resident and unpinned), freeing the nodes nothing else keeps.
func (t *GroupTree) clearTiers() {
	ts := t.tiers
	for i := range ts.lv {
		l := &ts.lv[i]
		for s, n := range l.node {
			if n == 0 {
				continue
			}
			l.at[int(n)*t.ng+int(l.group[s])] = 0
			l.node[s], l.group[s], l.st[s] = 0, 0, slotNone
			l.holds[s] = 0
			l.hgen[s]++
			t.nodes[n].entries--
			t.maybeFree(n)
		}
		l.reset()
	}
}
