package prefix

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"pgregory.net/rapid"
)

// tierMachine drives an index with a host tier and, drawn, a disk tier through random
// admissions, releases, plans, completions (ok and failed), evictions and resets, and
// holds it to a reference model of what each tier holds, built from nothing but the
// events: per medium, the set of block hashes stored and not removed since.
//
// After every step it checks:
//   - CheckInvariants (each tier's slots, policy, pins and references, and the tree);
//   - no duplicate event: a block is stored into a medium only while that medium does not
//     hold it, and removed only while it does (a block that moves is reported once per tier);
//   - nothing lost: for every prompt drawn so far, the lookup past the device (PeekLower)
//     finds, block by block, exactly the continuation the model's sets predict, each block
//     in the fastest tier holding it: a block confirmed stored can be loaded until its tier
//     reports it removed, and a block no tier holds is never found;
//   - transfers: a store completed ok reports exactly its blocks stored in its
//     destination, a failed one none; a failed load removes its keys from their tiers; plans' runs and bytes add up; each tier's
//     Resident count is the model's;
//   - holds: Hold succeeds exactly when HoldNeed's need fits its room, then holds every
//     block it was given, and a refused one changes nothing; under a write-back disk, a
//     Hold loses no host block the disk does not hold; after a Hold, every held block has a
//     good copy below or one in flight from a good source (not a slot a failed load hid or
//     doomed); a held block is never removed from the last lower tier holding it
//     but by a failed transfer or a Reset, and HeldBlocks never exceeds what was held;
//   - no host block lost that the disk could take: under a write-back disk, the host's
//     Lost grows in a step that completes no transfer only if the disk had no room (lostCheck);
//   - nothing leaked: once every transfer completes and every request has gone, every
//     device block is free or evictable, no copy holds a reference, and nothing is pending.
//
// Drawn: the tiers' write policies and sizes, StreamOrdered (a store's device source is
// released when handed out), and prompts with a multimodal input (tiered as any block,
// told apart by their extra keys).
type tierMachine struct {
	pool    *blocks.Pool
	x       *Index
	bs      int
	media   []string // per tier, Device first
	held    []map[string]bool
	prompts []Prompt
	reqs    []*tierReq
	plans   []Plan // handed out, not completed (one per ID)
	// events seen during the current step, per medium
	stored, removed map[string]int
	cleared         bool
	failed          error
	// holds are the holds placed and not released, with the hashes each was asked to
	// keep; mayDrop is set while a step may drop held blocks (a failed transfer, a Reset).
	holds   map[HoldID][]string
	mayDrop bool
	// failedLoads counts the failed loads from each tier.
	failedLoads [MaxTiers]int
	// lostCheck: the host's Lost and whether a write-back disk had room after the last
	// step, and whether the current step failed a transfer or reset the tiers.
	lostCheck
	// focus draws the write-back pressure the hidden-below case needs (newTierMachine).
	focus bool
}

// lostCheck is both tier machines' check that, under a write-back disk, making room in
// the host loses no block that the disk could have taken: the host's Lost grows, in a step
// that completes no transfer and resets nothing, only if the disk had no room (no free
// slot, no candidate) before or after it. (A completion is excused: an ok one may end a
// copy an earlier failed load doomed, and drop its source.) Within such a step the disk's room only shrinks, so
// room after means room throughout: a host victim with no copy below is written down, and
// one whose disk slot is no copy (a failed load hid it) is skipped, not dropped (makeRoom).
type lostCheck struct {
	hostLost uint64
	diskRoom bool
	failing  bool
}

// step checks the step that just ran, given the host's Lost and the disk's room now.
func (lc *lostCheck) step(t *rapid.T, writeBackDisk bool, lost uint64, room bool) {
	if writeBackDisk && !lc.failing && lc.diskRoom && room && lost != lc.hostLost {
		t.Fatalf("the host lost %d blocks while the write-back disk had room", lost-lc.hostLost)
	}
	lc.hostLost, lc.diskRoom, lc.failing = lost, room, false
}

type tierReq struct {
	p       Prompt
	cur     Cursor
	ids     []blocks.ID
	hit     int
	load    TransferID
	loadN   int
	loadTi  []Tier // source tier of each loaded block
	hashes  []string
	pending bool
}

func (mc *tierMachine) fail(format string, a ...any) {
	if mc.failed == nil {
		mc.failed = fmt.Errorf(format, a...)
	}
}

func (mc *tierMachine) tierOf(m string) int {
	if m == "" {
		return 0
	}
	for i, x := range mc.media {
		if x == m {
			return i
		}
	}
	mc.fail("event with unknown medium %q", m)
	return 0
}

func (mc *tierMachine) BlockStored(e *BlockStored) {
	t := mc.tierOf(e.Medium)
	for i := range e.Blocks {
		h := string(e.Hash(i))
		if mc.held[t][h] {
			mc.fail("block %x stored into %s twice", h, mc.media[t])
		}
		mc.held[t][h] = true
	}
	mc.stored[mc.media[t]] += len(e.Blocks)
}

func (mc *tierMachine) BlockRemoved(e *BlockRemoved) {
	t := mc.tierOf(e.Medium)
	for i := range e.Blocks {
		h := string(e.Hash(i))
		if !mc.held[t][h] {
			mc.fail("block %x removed from %s, which does not hold it", h, mc.media[t])
		}
		delete(mc.held[t], h)
		if t == 0 || mc.inLowerTier(h) {
			continue
		}
		for id, hs := range mc.holds {
			if !slices.Contains(hs, h) {
				continue
			}
			if !mc.mayDrop {
				mc.fail("block %x of hold %d removed from %s, the last tier holding it", h, id, mc.media[t])
			}
			// Dropped by a failed transfer: the hold no longer covers the block, stored
			// again later under a new entry.
			mc.holds[id] = slices.DeleteFunc(hs, func(x string) bool { return x == h })
		}
	}
	mc.removed[mc.media[t]] += len(e.Blocks)
}

// inLowerTier reports whether the events say a lower tier holds h (a block moving down a
// tier is reported stored in the new one before it leaves the old).
func (mc *tierMachine) inLowerTier(h string) bool {
	for i := 1; i < len(mc.held); i++ {
		if mc.held[i][h] {
			return true
		}
	}
	return false
}

func (mc *tierMachine) AllBlocksCleared() {
	mc.cleared = true
	for i := range mc.held {
		clear(mc.held[i])
	}
}

var tierNamespaces = []Namespace{{}, {Salt: "s"}}

// newTierMachine draws the machine's pool and tiers. With focus it draws the pressure
// under which a host victim's disk slot is a failed load's (the hidden-below case of
// makeRoom): a write-through host of two blocks over a write-back disk of three to six,
// and three prompts of one block (drawPrompt), so that the few keys move between
// the tiers often.
func newTierMachine(t *rapid.T, focus bool) *tierMachine {
	mc := &tierMachine{bs: testBS, holds: map[HoldID][]string{}, focus: focus}
	n := rapid.IntRange(6, 16).Draw(t, "poolBlocks")
	var err error
	if mc.pool, err = blocks.New(n, blocks.WithNullBlock()); err != nil {
		t.Fatal(err)
	}
	cfg := TierConfig{BlockBytes: 100, FreeTarget: rapid.IntRange(0, 4).Draw(t, "freeTarget"), StreamOrdered: rapid.Bool().Draw(t, "stream")}
	host := rapid.IntRange(2, 10)
	if focus {
		host = rapid.IntRange(2, 2)
	}
	write := rapid.IntRange(0, 2)
	if focus {
		write = rapid.IntRange(int(WriteThrough), int(WriteThrough)) // every computed block goes down
	}
	cfg.Tiers = append(cfg.Tiers, TierSpec{
		Medium: MediumCPU, Capacity: host.Draw(t, "host"),
		Write: WritePolicy(write.Draw(t, "hostWrite")), Hits: uint32(rapid.IntRange(1, 3).Draw(t, "hits")),
	})
	if focus {
		cfg.Tiers = append(cfg.Tiers, TierSpec{Medium: MediumDisk, Capacity: rapid.IntRange(3, 6).Draw(t, "diskBlocks"), Write: WriteBack})
	} else if rapid.Bool().Draw(t, "disk") {
		cfg.Tiers = append(cfg.Tiers, TierSpec{
			Medium: MediumDisk, Capacity: rapid.IntRange(2, 14).Draw(t, "diskBlocks"),
			Write: WritePolicy(rapid.IntRange(0, 1).Draw(t, "diskWrite")),
		})
	}
	mc.media = []string{MediumGPU}
	for _, s := range cfg.Tiers {
		mc.media = append(mc.media, s.Medium)
	}
	for range mc.media {
		mc.held = append(mc.held, map[string]bool{})
	}
	if mc.x, err = New(mc.pool, testBS, WithTiers(cfg), WithObserver(mc), WithSeed(1)); err != nil {
		t.Fatal(err)
	}
	return mc
}

// hashes is the event hash of each full block of p (Fast64, as events carry it).
func (mc *tierMachine) hashes(p *Prompt) []string {
	var out []string
	prev := make([]byte, 8)
	Fast64{}.Root(prev)
	for b := 0; (b+1)*mc.bs <= len(p.Tokens); b++ {
		e := Extra{LoRA: p.Namespace.LoRA}
		if b == 0 {
			e.Salt = p.Namespace.Salt
		}
		for _, m := range p.MM { // the identifier form: each input overlapping the block
			if m.Length > 0 && m.Offset < (b+1)*mc.bs && m.Offset+m.Length > b*mc.bs {
				e.MM = append(e.MM, m.Hash)
			}
		}
		h := make([]byte, 8)
		Fast64{}.Block(h, prev, p.Tokens[b*mc.bs:(b+1)*mc.bs], e)
		out = append(out, string(h))
		prev = h
	}
	return out
}

func (mc *tierMachine) drawPrompt(t *rapid.T) Prompt {
	if mc.focus { // three keys of one block each, found under LeaveOne, over a host of two
		k := rapid.IntRange(0, 2).Draw(t, "key")
		p := Prompt{Tokens: []int32{int32(k), int32(k), int32(k), int32(k), 9}}
		mc.prompts = append(mc.prompts, p)
		return p
	}
	if len(mc.prompts) > 0 && rapid.IntRange(0, 2).Draw(t, "reuse") > 0 {
		return mc.prompts[rapid.IntRange(0, len(mc.prompts)-1).Draw(t, "which")]
	}
	p := Prompt{Namespace: rapid.SampledFrom(tierNamespaces).Draw(t, "ns")}
	n := rapid.IntRange(1, 4*mc.bs+1).Draw(t, "len")
	p.Tokens = make([]int32, n)
	for i := range p.Tokens {
		p.Tokens[i] = rapid.Int32Range(0, 1).Draw(t, "tok")
	}
	if rapid.IntRange(0, 3).Draw(t, "mm") == 0 { // an image over some tokens
		off := rapid.IntRange(0, n-1).Draw(t, "mmOffset")
		p.MM = []MMInput{{Hash: rapid.SampledFrom([]string{"img-a", "img-b"}).Draw(t, "mmHash"), Offset: off,
			Length: rapid.IntRange(1, n-off).Draw(t, "mmLength")}}
	}
	mc.prompts = append(mc.prompts, p)
	return p
}

func (mc *tierMachine) beginStep() {
	mc.stored, mc.removed, mc.cleared = map[string]int{}, map[string]int{}, false
}

// predict is the continuation past d device blocks the model's sets give, per tier.
func (mc *tierMachine) predict(p *Prompt, d int, limit HitLimit) [MaxTiers]int {
	var out [MaxTiers]int
	out[Device] = d
	hs := mc.hashes(p)
	n := len(p.Tokens)
	if limit == LeaveOne {
		n--
	}
	for b := d; b < n/mc.bs; b++ {
		t := 0
		for i := 1; i < len(mc.media); i++ {
			if mc.held[i][hs[b]] {
				t = i
				break
			}
		}
		if t == 0 {
			break
		}
		out[t]++
	}
	return out
}

func (mc *tierMachine) Admit(t *rapid.T) {
	mc.beginStep()
	p := mc.drawPrompt(t)
	limit := HitLimit(rapid.Bool().Draw(t, "leaveOne"))
	mc.admit(t, p, limit, func(lower int) int { return rapid.IntRange(0, lower).Draw(t, "load") })
	mc.check(t)
}

// admit admits prompt p, loading load(n) of the n blocks past its device hit that lower
// tiers hold, and returns the request (nil when the pool has no room for it).
func (mc *tierMachine) admit(t *rapid.T, p Prompt, limit HitLimit, load func(lower int) int) *tierReq {
	r := &tierReq{p: p}
	r.ids, r.cur = mc.x.Peek(nil, &r.p, limit)
	r.hit = len(r.ids)
	h := mc.x.PeekLower(&r.p, r.cur, limit, 0)
	if want := mc.predict(&r.p, r.hit, limit); h.Blocks != want {
		t.Fatalf("PeekLower %v: %v, model %v", r.p, h.Blocks, want)
	}
	full := len(r.p.Tokens) / mc.bs
	need := (len(r.p.Tokens)+mc.bs-1)/mc.bs - r.hit
	if mc.pool.Available()-mc.x.ReclaimableOf(r.ids) < need {
		return nil
	}
	must(t, mc.x.Acquire(r.ids))
	var err error
	if r.ids, err = mc.pool.Allocate(r.ids, need); err != nil {
		t.Fatalf("allocate %d: %v", need, err)
	}
	r.loadN = min(h.Lower, load(h.Lower))
	if r.loadN > 0 {
		hs := mc.hashes(&r.p)
		for b := r.hit; b < r.hit+r.loadN; b++ {
			for i := 1; i < len(mc.media); i++ {
				if mc.held[i][hs[b]] {
					r.loadTi = append(r.loadTi, Tier(i))
					r.hashes = append(r.hashes, hs[b])
					break
				}
			}
		}
		r.load, err = mc.x.PrepareLoad(&r.p, r.cur, limit, r.ids[r.hit:r.hit+r.loadN])
		must(t, err)
		r.pending = true
	} else {
		_, err = mc.x.Commit(&r.cur, &r.p, r.ids[r.hit:full])
		must(t, err)
	}
	mc.reqs = append(mc.reqs, r)
	return r
}

func must(t *rapid.T, err error) {
	if err != nil {
		t.Fatal(err)
	}
}

func (mc *tierMachine) Finish(t *rapid.T) {
	if len(mc.reqs) == 0 {
		t.Skip("no request")
	}
	mc.beginStep()
	i := rapid.IntRange(0, len(mc.reqs)-1).Draw(t, "req")
	r := mc.reqs[i]
	must(t, mc.x.Release(r.ids))
	mc.reqs = slices.Delete(mc.reqs, i, i+1)
	mc.check(t)
}

func (mc *tierMachine) TakePlans(t *rapid.T) {
	mc.beginStep()
	got := mc.x.TakePlans(nil)
	for _, p := range got {
		n := 0
		for _, rn := range p.Runs {
			n += int(rn.Blocks)
			if rn.Blocks <= 0 || rn.Src < 0 || rn.Dst < 0 {
				t.Fatalf("plan %d: bad run %+v", p.ID, rn)
			}
		}
		if n != p.Blocks || p.Bytes != int64(n)*100 || (p.Kind == Load) != (p.To == Device) || p.From == p.To {
			t.Fatalf("plan %+v: %d blocks in runs", p, n)
		}
		if p.Kind == Store && mc.stored[mc.media[p.To]] > 0 {
			t.Fatalf("a store reported its blocks before completing")
		}
		if k := len(mc.plans); k > 0 && mc.plans[k-1].ID == p.ID {
			mc.plans[k-1].Blocks += p.Blocks // one load from two tiers
			continue
		}
		mc.plans = append(mc.plans, p)
	}
	mc.check(t)
}

func (mc *tierMachine) Complete(t *rapid.T) {
	if len(mc.plans) == 0 {
		t.Skip("no plan")
	}
	i := rapid.IntRange(0, len(mc.plans)-1).Draw(t, "plan")
	mc.complete(t, i, rapid.IntRange(0, 3).Draw(t, "ok") > 0)
}

// complete completes plan mc.plans[i] with outcome ok, and checks what it did.
func (mc *tierMachine) complete(t *rapid.T, i int, ok bool) {
	mc.beginStep()
	p := mc.plans[i]
	mc.plans = slices.Delete(mc.plans, i, i+1)
	mc.mayDrop = !ok
	mc.failing = true // a completion may end a copy an earlier failed load doomed
	failedBefore := mc.x.TierStatsOf(p.To).StoreFailed
	res, err := mc.x.CompleteTransfer(p.ID, ok)
	mc.mayDrop = false
	if !ok {
		// A failed store drops held blocks it was copying, which no event reported
		// stored: the model keeps, per hold, only what a lower tier holds now (and so
		// checks less of a hold whose other copies are still in flight).
		for id, hs := range mc.holds {
			mc.holds[id] = slices.DeleteFunc(hs, func(h string) bool { return !mc.inLowerTier(h) })
		}
	}
	must(t, err)
	if res.Kind != p.Kind || res.Blocks != p.Blocks || res.OK != ok {
		t.Fatalf("completed %+v for plan %+v", res, p)
	}
	if p.Kind == Store {
		want := 0
		if ok {
			// A copy between lower tiers whose source a failed load found bad since lands
			// nowhere, counted as a failed store.
			doomed := int(mc.x.TierStatsOf(p.To).StoreFailed - failedBefore)
			if doomed > 0 && (p.From == Device || mc.failedLoads[p.From] == 0) {
				t.Fatalf("store of %d blocks from %s completed ok failed %d with no failed load from its source", p.Blocks, mc.media[p.From], doomed)
			}
			want = p.Blocks - doomed
		}
		if got := mc.stored[mc.media[p.To]]; got != want {
			t.Fatalf("store of %d blocks completed ok=%v reported %d stored into %s", p.Blocks, ok, got, mc.media[p.To])
		}
	} else {
		if !ok {
			for ti, n := range res.Sources {
				if ti != int(Device) && n > 0 {
					mc.failedLoads[ti]++
				}
			}
		}
		for _, r := range mc.reqs {
			if r.load != p.ID {
				continue
			}
			r.pending = false
			// A failed load evicts its keys from their tiers. (After one that succeeded a
			// block may have left too: a write-back to the tier below, or another
			// request's failed load, waited for this load's copy to end.)
			for j, h := range r.hashes {
				if !ok && mc.held[r.loadTi[j]][h] {
					t.Fatalf("failed load: block %d still in %s", j, mc.media[r.loadTi[j]])
				}
			}
			if ok {
				full := len(r.p.Tokens) / mc.bs
				_, err := mc.x.Commit(&r.cur, &r.p, r.ids[r.hit:full])
				must(t, err)
			} else {
				// computed after all: committed as admission would have
				_, err := mc.x.Commit(&r.cur, &r.p, r.ids[r.hit:len(r.p.Tokens)/mc.bs])
				must(t, err)
			}
		}
	}
	mc.check(t)
}

func (mc *tierMachine) Evict(t *rapid.T) {
	mc.beginStep()
	mc.x.Evict(rapid.IntRange(1, 4).Draw(t, "n"))
	mc.check(t)
}

func (mc *tierMachine) Reset(t *rapid.T) {
	mc.beginStep()
	before := mc.x.TierStatsOf(1)
	mc.mayDrop = true
	mc.failing = true
	err := mc.x.Reset()
	mc.mayDrop = false
	if err != nil {
		if mc.cleared || mc.x.TierStatsOf(1) != before {
			t.Fatalf("a refused Reset changed something")
		}
		return
	}
	if !mc.cleared {
		t.Fatalf("Reset reported no AllBlocksCleared")
	}
	for id := range mc.holds {
		mc.holds[id] = nil // every hold lapses
	}
	for ti := 1; ti < len(mc.media); ti++ {
		if s := mc.x.TierStatsOf(Tier(ti)); s.Resident != 0 || s.Pending != 0 {
			t.Fatalf("Reset left tier %d %+v", ti, s)
		}
	}
	mc.check(t)
}

// Hold holds the full blocks of a request that is not loading, as a swap-out does.
func (mc *tierMachine) Hold(t *rapid.T) {
	var live []*tierReq
	for _, r := range mc.reqs {
		if !r.pending {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		t.Skip("no request")
	}
	r := rapid.SampledFrom(live).Draw(t, "req")
	full := len(r.p.Tokens) / mc.bs
	mc.hold(t, r, r.ids[:rapid.IntRange(0, full).Draw(t, "holdBlocks")])
}

// hold holds ids, the first blocks of request r, and checks what it did.
func (mc *tierMachine) hold(t *rapid.T, r *tierReq, ids []blocks.ID) {
	mc.beginStep()
	for _, id := range ids {
		if !mc.x.IsCached(id) {
			t.Skip("a duplicate commit left the request an uncached copy")
		}
	}
	need, room := mc.x.HoldNeed(ids)
	before := mc.digest(t)
	lost := mc.x.TierStatsOf(1).Lost
	h, err := mc.x.Hold(ids)
	if len(mc.media) > 2 && mc.x.tiers.lv[1].spec.Write == WriteBack && mc.x.TierStatsOf(1).Lost != lost {
		t.Fatalf("a Hold under a write-back disk lost %d host blocks", mc.x.TierStatsOf(1).Lost-lost)
	}
	if need > room {
		var full *TierFullError
		if !errors.As(err, &full) || full.Requested != need || full.Available != room {
			t.Fatalf("Hold with need %d > room %d: %v", need, room, err)
		}
		if after := mc.digest(t); after != before {
			t.Fatalf("a refused Hold changed the state:\n%s\n%s", before, after)
		}
		mc.check(t)
		return
	}
	must(t, err)
	// Every block is held: it was in a lower tier or its copy was prepared (no prompt is
	// under a retired epoch here, and keys do not collide).
	if got := mc.x.HeldBlocks(h); got != len(ids) {
		t.Fatalf("hold of %d blocks keeps %d", len(ids), got)
	}
	for _, id := range ids {
		if !mc.heldCopy(id) {
			t.Fatalf("held block %d has no good copy in any lower tier and none in flight", id)
		}
	}
	if h != 0 {
		mc.holds[h] = mc.hashes(&r.p)[:len(ids)]
	}
	mc.check(t)
}

// heldCopy reports whether cached device block id has a copy a hold keeps: resident in a
// lower tier, or in flight into one from a good source (the device into tier 1, or a
// resident slot of the tier above); a slot a failed load hid (pending and leaving) or
// doomed is none.
func (mc *tierMachine) heldCopy(id blocks.ID) bool {
	ts := mc.x.tiers
	e := ts.devEnt[nodeOf(id)] - 1
	if e < 0 {
		return false
	}
	en := &ts.ents[e]
	for i := range ts.lv {
		if en.st[i] == slotResident || en.st[i] == slotPending && !en.leaving[i] && (i == 0 || en.st[i-1] == slotResident) {
			return true
		}
	}
	return false
}

// ReleaseHold releases a hold.
func (mc *tierMachine) ReleaseHold(t *rapid.T) {
	if len(mc.holds) == 0 {
		t.Skip("no hold")
	}
	mc.beginStep()
	ids := make([]HoldID, 0, len(mc.holds))
	for id := range mc.holds {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	h := rapid.SampledFrom(ids).Draw(t, "hold")
	must(t, mc.x.ReleaseHold(h))
	delete(mc.holds, h)
	if !errors.Is(mc.x.ReleaseHold(h), ErrUnknownHold) {
		t.Fatalf("hold %d released twice", h)
	}
	mc.check(t)
}

// digest is what a refused call must leave as it was: the tree, every tier's counters,
// the transfers and the references they hold, the holds and the pool.
func (mc *tierMachine) digest(t *rapid.T) string {
	var b strings.Builder
	must(t, mc.x.WriteState(&b))
	for ti := range mc.media {
		fmt.Fprintf(&b, "|%+v", mc.x.TierStatsOf(Tier(ti)))
	}
	refs := 0
	for id := range mc.pool.NumBlocks() {
		refs += mc.x.TransferRefs(blocks.ID(id))
	}
	fmt.Fprintf(&b, "|%d %d %+v", mc.x.PendingTransfers(), refs, mc.pool.Stats())
	hs := make([]HoldID, 0, len(mc.holds))
	for h := range mc.holds {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	for _, h := range hs {
		fmt.Fprintf(&b, "|%d:%d", h, mc.x.HeldBlocks(h))
	}
	return b.String()
}

// Refused tries calls the lower tiers must refuse with their typed error, changing
// nothing: an unknown hold or transfer, a hold of an uncached block, a load into a block
// nobody holds, and a load of more blocks than the lower tiers have.
func (mc *tierMachine) Refused(t *rapid.T) {
	mc.beginStep()
	before := mc.digest(t)
	refused := func(what string, err error, want ...error) {
		for _, w := range want {
			if errors.Is(err, w) {
				if after := mc.digest(t); after != before {
					t.Fatalf("refused %s changed the state:\n%s\n%s", what, before, after)
				}
				return
			}
		}
		t.Fatalf("%s: %v, want one of %v", what, err, want)
	}
	switch rapid.IntRange(0, 4).Draw(t, "refusal") {
	case 0:
		refused("release of an unknown hold", mc.x.ReleaseHold(HoldID(1<<40)), ErrUnknownHold)
	case 1:
		_, err := mc.x.CompleteTransfer(TransferID(1<<40), rapid.Bool().Draw(t, "ok"))
		refused("completion of an unknown transfer", err, ErrUnknownTransfer)
	case 2:
		var ids []blocks.ID
		for _, r := range mc.reqs {
			if !r.pending {
				ids = append(ids, r.ids...)
			}
		}
		var uncached blocks.ID = -1
		for id := range mc.pool.NumBlocks() {
			if !mc.x.IsCached(blocks.ID(id)) {
				uncached = blocks.ID(id)
				break
			}
		}
		if uncached < 0 {
			t.Skip("every block cached")
		}
		ids = append(ids, uncached)
		_, err := mc.x.Hold(ids)
		refused("hold of an uncached block", err, ErrNotCached)
	case 3, 4:
		p := mc.drawPrompt(t)
		limit := HitLimit(rapid.Bool().Draw(t, "leaveOne"))
		_, cur := mc.x.Peek(nil, &p, limit)
		lower := mc.x.PeekLower(&p, cur, limit, 0).Lower
		var dst []blocks.ID
		for id := range mc.pool.NumBlocks() {
			if mc.pool.RefCount(blocks.ID(id)) == 0 && !mc.x.IsCached(blocks.ID(id)) {
				dst = append(dst, blocks.ID(id))
				break
			}
		}
		if len(dst) == 0 {
			t.Skip("no free block")
		}
		if lower > 0 {
			// A block nobody holds.
			_, err := mc.x.PrepareLoad(&p, cur, limit, dst)
			refused("load into a block nobody holds", err, ErrNotHeld)
			return
		}
		// More blocks than the lower tiers have (none), into a block the caller holds.
		var err error
		if dst, err = mc.pool.Allocate(dst[:0], 1); err != nil {
			t.Skip("no block to allocate")
		}
		before = mc.digest(t)
		_, err = mc.x.PrepareLoad(&p, cur, limit, dst)
		refused("load of blocks no lower tier has", err, ErrNotCached)
		must(t, mc.pool.Release(dst...))
	}
	mc.check(t)
}

func (mc *tierMachine) check(t *rapid.T) {
	if mc.failed != nil {
		t.Fatal(mc.failed)
	}
	if err := mc.x.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if err := mc.pool.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	for ti := 1; ti < len(mc.media); ti++ {
		if got := mc.x.TierStatsOf(Tier(ti)).Resident; got != len(mc.held[ti]) {
			t.Fatalf("tier %d holds %d blocks, its events say %d", ti, got, len(mc.held[ti]))
		}
	}
	if wb := len(mc.media) > 2 && mc.x.tiers.lv[1].spec.Write == WriteBack; wb || mc.failing {
		var room bool
		if wb {
			d := &mc.x.tiers.lv[1]
			room = len(d.free)+d.policy.Len() > 0
		}
		mc.lostCheck.step(t, wb, mc.x.TierStatsOf(1).Lost, room)
	}
	if got := mc.x.TierStatsOf(Device).Resident; got != len(mc.held[0]) {
		t.Fatalf("device caches %d blocks, its events say %d", got, len(mc.held[0]))
	}
	for i := range mc.prompts {
		p := &mc.prompts[i]
		for _, limit := range []HitLimit{WholePrompt, LeaveOne} {
			ids, cur := mc.x.Peek(nil, p, limit)
			if h := mc.x.PeekLower(p, cur, limit, 0); h.Blocks != mc.predict(p, len(ids), limit) {
				t.Fatalf("PeekLower %v: %v, model %v", p, h.Blocks, mc.predict(p, len(ids), limit))
			}
		}
	}
}

// drain completes every transfer and releases every request, then checks for leaks.
func (mc *tierMachine) drain(t *rapid.T) {
	for h := range mc.holds {
		must(t, mc.x.ReleaseHold(h))
		delete(mc.holds, h)
	}
	for len(mc.plans) > 0 || len(mc.reqs) > 0 || mc.x.PendingTransfers() > 0 {
		for len(mc.plans) > 0 {
			mc.Complete(t)
		}
		for len(mc.reqs) > 0 {
			mc.Finish(t)
		}
		mc.TakePlans(t)
	}
	if got := mc.pool.NumFree() + mc.x.Reclaimable(); got != mc.pool.Capacity() {
		t.Fatalf("after draining, %d free + %d evictable of %d", mc.pool.NumFree(), mc.x.Reclaimable(), mc.pool.Capacity())
	}
	for id := range mc.pool.NumBlocks() {
		if mc.x.TransferRefs(blocks.ID(id)) != 0 {
			t.Fatalf("block %d keeps a transfer reference", id)
		}
	}
	for ti := 1; ti < len(mc.media); ti++ {
		if s := mc.x.TierStatsOf(Tier(ti)); s.Pending != 0 {
			t.Fatalf("tier %d keeps %d pending slots", ti, s.Pending)
		}
	}
}

// StoresSettled hands out the plans due and completes every store among them ok, loads
// left in flight: the steps of an owner whose copies go down while its loads are still
// under way.
func (mc *tierMachine) StoresSettled(t *rapid.T) {
	mc.TakePlans(t)
	for i := 0; i < len(mc.plans); {
		if mc.plans[i].Kind == Load {
			i++
			continue
		}
		mc.complete(t, i, true)
	}
}

// LoadTwiceFailOne admits a prompt whose block a lower tier holds and the device does not
// twice, each loading it in a transfer of its own, and fails the first: the slot both read
// is hidden (its bytes bad), and stays busy until the second load, left in flight, ends.
// The first request computes the block again and holds it (a swap-out's Hold), so that
// the host takes a copy while the disk's slot is hidden. With no
// such prompt it first finishes every request not loading and evicts every evictable
// device block.
func (mc *tierMachine) LoadTwiceFailOne(t *rapid.T) {
	var ps []Prompt
	for range 2 { // the second time with the device emptied
		for _, p := range mc.prompts {
			ids, cur := mc.x.Peek(nil, &p, LeaveOne)
			if len(ids) == 0 && mc.x.PeekLower(&p, cur, LeaveOne, 0).Lower > 0 {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			break
		}
		mc.beginStep()
		mc.reqs = slices.DeleteFunc(mc.reqs, func(r *tierReq) bool {
			if !r.pending {
				must(t, mc.x.Release(r.ids))
			}
			return !r.pending
		})
		mc.x.Evict(mc.pool.Capacity())
		mc.check(t)
	}
	if len(ps) == 0 {
		t.Skip("no prompt held below alone")
	}
	p := rapid.SampledFrom(ps).Draw(t, "twice")
	all := func(lower int) int { return lower }
	mc.beginStep()
	r1 := mc.admit(t, p, LeaveOne, all)
	if r1 == nil {
		t.Skip("no room")
	}
	if r2 := mc.admit(t, p, LeaveOne, all); r2 == nil || r2.load == 0 {
		t.Skip("no room, or nothing left to load") // r1 stays, as an Admit
	}
	mc.check(t)
	mc.TakePlans(t)
	i := slices.IndexFunc(mc.plans, func(pl Plan) bool { return pl.ID == r1.load })
	if i < 0 {
		t.Fatalf("load %d not handed out", r1.load)
	}
	mc.complete(t, i, false) // r1 computes the block: its copy down is a Hold's
	mc.hold(t, r1, r1.ids[:len(r1.p.Tokens)/mc.bs])
}

func runTierMachine(t *rapid.T) { runTierMachineWith(t, false) }

func runTierMachineWith(t *rapid.T, focus bool) {
	mc := newTierMachine(t, focus)
	steps := map[string]func(*rapid.T){
		"admit":    mc.Admit,
		"finish":   mc.Finish,
		"plans":    mc.TakePlans,
		"complete": mc.Complete,
		"evict":    mc.Evict,
		"reset":    mc.Reset,
		"hold":     mc.Hold,
		"release":  mc.ReleaseHold,
		"refused":  mc.Refused,
		"":         mc.check,
	}
	if focus {
		delete(steps, "reset")
		delete(steps, "refused")
		steps["storesSettled"] = mc.StoresSettled
		steps["loadTwiceFailOne"] = mc.LoadTwiceFailOne
	}
	t.Repeat(neverStuck(steps))
	mc.drain(t)
}

func TestTierStateMachine(t *testing.T) {
	rapid.Check(t, runTierMachine)
}

// TestTierStateMachineUnderWriteBack runs the machine focused on write-back pressure and
// failed loads (newTierMachine, StoresSettled, LoadTwiceFailOne), so that its default run
// reaches the hidden-below case of makeRoom that the unfocused one reaches rarely.
func TestTierStateMachineUnderWriteBack(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runTierMachineWith(t, true) })
}

// FuzzTierHolds runs the tier machine (holds, prepared stores and loads, completions ok
// and failed, evictions, resets and refused calls, over one or two lower tiers of drawn
// write policies) on fuzzer-chosen bytes. Each input is one short run, so that .ci/run's
// 3000-input pass stays within a few seconds of fuzzing.
func FuzzTierHolds(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		{8, 0, 3, 1, 0, 1, 1, 1, 9, 9, 9, 9, 0, 2, 4, 6, 8, 10, 12, 14, 16},
		{255, 0, 255, 0, 255, 0, 17, 42, 99, 3, 3, 3, 3},
		[]byte("a swapped-out prefix is held in the host while a write-back disk fills"),
	} {
		f.Add(seed)
	}
	f.Fuzz(rapid.MakeFuzz(runTierMachine))
}
