package prefix

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kvpage/kvpage/blocks"
)

// Transfers, for maintainers. Every copy is prepared (its source pinned, its destination
// reserved), handed to the server in a Plan by TakePlans, and completed by
// CompleteTransfer with the server's outcome; only then does the source's slot or block
// become reusable, or the destination's content count. Stores prepared between two
// TakePlans calls form one plan per pair of tiers; each load (one admission) is its own
// plan, since its outcome decides what that request computes. A load whose blocks come
// from several tiers is one transfer handed out as one Plan per source tier, all with the
// same ID; the server completes the ID once, when all of them are done.

// tierOp is one block's copy: src and dst are device block IDs or lower-tier slots.
type tierOp struct {
	from, to Tier
	e        int32
	src, dst int32
}

type planRec struct {
	id   TransferID
	kind TransferKind
	ops  []tierOp
	runs []Run
	// srcFreed marks a store whose device sources TakePlans released already
	// (TierConfig.StreamOrdered).
	srcFreed bool
}

// planBook is the transfers of one tree's tiers (an Index's or a GroupTree's): the stores
// prepared since the last TakePlans, every prepared transfer by ID until it completes, the
// loads not yet handed out, and spare records for reuse.
type planBook struct {
	queue  []tierOp // stores prepared since the last TakePlans
	plans  map[TransferID]*planRec
	ready  []*planRec // prepared loads not yet handed out
	spare  []*planRec
	nextID TransferID
	// srcScratch is takeStoreSources' result, reused.
	srcScratch []int32
}

func newPlanBook() planBook { return planBook{plans: make(map[TransferID]*planRec)} }

func (ts *planBook) newPlan(kind TransferKind) *planRec {
	var r *planRec
	if k := len(ts.spare); k > 0 {
		r = ts.spare[k-1]
		ts.spare = ts.spare[:k-1]
	} else {
		r = &planRec{}
	}
	ts.nextID++
	r.id, r.kind, r.ops, r.runs, r.srcFreed = ts.nextID, kind, r.ops[:0], r.runs[:0], false
	ts.plans[r.id] = r
	return r
}

// flushStores turns the queued stores into one plan per pair of tiers, sorted by source
// so that runs coalesce, after match has given each group of ops (stores into one tier,
// sorted by source) its destination slots, and appends them to dst.
func (ts *planBook) flushStores(dst []Plan, bb int64, stats *[MaxTiers]TierStats, match func(ops []tierOp)) []Plan {
	if len(ts.queue) == 0 {
		return dst
	}
	slices.SortStableFunc(ts.queue, func(a, b tierOp) int {
		if c := cmp.Compare(a.from, b.from); c != 0 {
			return c
		}
		if c := cmp.Compare(a.to, b.to); c != 0 {
			return c
		}
		return cmp.Compare(a.src, b.src)
	})
	for i := 0; i < len(ts.queue); {
		j := i
		for j < len(ts.queue) && ts.queue[j].from == ts.queue[i].from && ts.queue[j].to == ts.queue[i].to {
			j++
		}
		match(ts.queue[i:j])
		r := ts.newPlan(Store)
		r.ops = append(r.ops, ts.queue[i:j]...)
		dst = appendPlans(dst, r, bb, stats)
		i = j
	}
	ts.queue = ts.queue[:0]
	return dst
}

// flushReady appends the prepared loads not handed out yet to dst.
func (ts *planBook) flushReady(dst []Plan, bb int64, stats *[MaxTiers]TierStats) []Plan {
	for i, r := range ts.ready {
		dst = appendPlans(dst, r, bb, stats)
		ts.ready[i] = nil
	}
	ts.ready = ts.ready[:0]
	return dst
}

// takePlan removes transfer id from the book, and returns it.
func (ts *planBook) takePlan(id TransferID) (*planRec, bool) {
	r, found := ts.plans[id]
	if !found {
		return nil, false
	}
	delete(ts.plans, id)
	// A load completed before TakePlans handed it out (a cancel) must leave ready too, or
	// the record, recycled below, would be handed out stale, even twice once reused.
	for i, q := range ts.ready {
		if q == r {
			ts.ready = slices.Delete(ts.ready, i, i+1)
			break
		}
	}
	return r, true
}

// recycle keeps a completed transfer's record for reuse.
func (ts *planBook) recycle(r *planRec) {
	r.ops, r.runs = r.ops[:0], r.runs[:0]
	ts.spare = append(ts.spare, r)
}

// pending is the number of transfers prepared and not yet completed, with each store not
// yet in a plan counted on its own.
func (ts *planBook) pending() int { return len(ts.plans) + len(ts.queue) }

// TakePlans starts the write-back demotions the free-block watermark asks for, then
// appends to dst every transfer prepared since the last call (write-through and
// write-back stores, loads of admitted requests) as plans, and returns dst. The server
// executes them, in order, and confirms each with CompleteTransfer; until then their
// sources stay pinned and their destinations reserved, except a store's device sources
// under TierConfig.StreamOrdered, which are released here (a demoted one stays cached,
// first in the eviction order, until an allocation takes it or CompleteTransfer evicts
// it). Plans' Runs stay valid until their transfer is completed.
func (x *Index) TakePlans(dst []Plan) []Plan {
	ts := x.tiers
	if ts == nil {
		return dst
	}
	// A server calls this every scheduler step, and most steps have nothing to hand out:
	// each part runs only when it has work (2.6 million calls a lagged W5 trace).
	// The slots the stores started here drop to make room are one event per tier.
	batch := x.obs != nil && (len(ts.hitQueue) > 0 || ts.cfg.FreeTarget > 0)
	if batch {
		x.beginTierEvents()
	}
	if len(ts.hitQueue) > 0 {
		x.startHitStores()
	}
	if ts.cfg.FreeTarget > 0 {
		x.demoteAhead()
	}
	if len(ts.queue) > 0 {
		from := len(dst)
		dst = ts.flushStores(dst, ts.cfg.BlockBytes, &ts.stats, x.matchSlots)
		if ts.cfg.StreamOrdered {
			x.releaseStoreSources(dst[from:])
		}
	}
	if len(ts.ready) > 0 {
		dst = ts.flushReady(dst, ts.cfg.BlockBytes, &ts.stats)
	}
	if batch {
		x.flushTierEvents()
	}
	x.mutated()
	return dst
}

// releaseStoreSources releases, as the plans are handed out, the device blocks the
// stores of plans read (TierConfig.StreamOrdered): the server issues the copies before
// anything writes those blocks again, so they are reusable now. A demoted one stays
// cached, first in the eviction order, until an allocation takes it or its copy completes
// (releaseStreamSource).
func (x *Index) releaseStoreSources(plans []Plan) {
	for _, src := range x.tiers.takeStoreSources(plans) {
		x.releaseStreamSource(blocks.ID(src))
	}
}

// takeStoreSources marks each store of plans that reads the device as having its
// sources released (planRec.srcFreed), once, and returns those device sources in plan
// order, in a scratch slice valid until the next call. Both trees release them
// (Index.releaseStoreSources, GroupTree.releaseStoreSources), each its own way.
func (ts *planBook) takeStoreSources(plans []Plan) []int32 {
	ts.srcScratch = ts.srcScratch[:0]
	for _, p := range plans {
		if p.Kind != Store || p.From != Device {
			continue
		}
		r := ts.plans[p.ID]
		if r.srcFreed {
			continue
		}
		r.srcFreed = true
		for _, op := range r.ops {
			if op.from == Device {
				ts.srcScratch = append(ts.srcScratch, op.src)
			}
		}
	}
	return ts.srcScratch
}

// matchSlots gives ops (stores into one tier, sorted by source) their reserved
// destination slots in ascending order, so that runs of consecutive sources land in runs
// of consecutive slots and coalesce. The slots are reservations nothing else names yet,
// so which entry takes which is free to choose.
func (x *Index) matchSlots(ops []tierOp) {
	ts := x.tiers
	slots := sortedDst(ts.slotBuf[:0], ops)
	ts.slotBuf = slots
	l := &ts.lv[ops[0].to-1]
	for i := range ops {
		op := &ops[i]
		op.dst = slots[i]
		l.owner[op.dst] = op.e + 1
		ts.ents[op.e].slot[op.to-1] = op.dst + 1
	}
}

// sortedDst appends ops' destination slots to slots, in ascending order.
func sortedDst(slots []int32, ops []tierOp) []int32 {
	for _, op := range ops {
		slots = append(slots, op.dst)
	}
	slices.Sort(slots)
	return slots
}

// appendPlans coalesces r's ops into runs and appends one Plan per source tier of r, each
// block bb bytes, counting the plans into their destination tiers' stats.
func appendPlans(dst []Plan, r *planRec, bb int64, stats *[MaxTiers]TierStats) []Plan {
	r.runs = r.runs[:0]
	for i := 0; i < len(r.ops); {
		op := r.ops[i]
		start := len(r.runs)
		for ; i < len(r.ops) && r.ops[i].from == op.from; i++ {
			o := r.ops[i]
			if k := len(r.runs); k > start {
				last := &r.runs[k-1]
				if last.Src+last.Blocks == o.src && last.Dst+last.Blocks == o.dst {
					last.Blocks++
					continue
				}
			}
			r.runs = append(r.runs, Run{Src: o.src, Dst: o.dst, Blocks: 1})
		}
		n := 0
		for _, rn := range r.runs[start:] {
			n += int(rn.Blocks)
		}
		dst = append(dst, Plan{ID: r.id, Kind: r.kind, From: op.from, To: op.to, Blocks: n, Bytes: int64(n) * bb})
		stats[op.to].Plans++
	}
	// Runs are sliced only now: appending to r.runs may have moved it.
	at := 0
	for i := len(dst) - 1; i >= 0 && dst[i].ID == r.id; i-- {
		at = i
	}
	off := 0
	for i := at; i < len(dst); i++ {
		k := 0
		for n := 0; n < dst[i].Blocks; k++ {
			n += int(r.runs[off+k].Blocks)
		}
		dst[i].Runs = r.runs[off : off+k : off+k]
		off += k
	}
	return dst
}

// CompleteTransfer confirms transfer id with the server's outcome. ok: a store's
// destination now holds the block (and a demoted device block is evicted, unless an
// allocation took it already: under TierConfig.StreamOrdered it is reusable from the
// TakePlans that handed the plan out); a load's device blocks hold the KV (the caller
// commits them). Failed: a store's destination is dropped (a demoted device block keeps
// its KV and stays cached, ranked in the device's eviction order as a block released now:
// evicted last, not next; StreamOrdered or not, as long as the device still has it, and a
// StreamOrdered one an allocation took meanwhile is counted in the device's Lost now; the
// source of a write-back between lower tiers stays too, ranked as used now); a load's
// source keys are evicted from their tiers and the caller computes those blocks. A failed
// load also means its sources' bytes are bad: a copy between lower tiers reading one of
// them that is still in flight lands nowhere when it completes, ok or not (its
// destination is dropped and counted in StoreFailed; OK still says what the server
// reported), while one confirmed before the failure stands. A load completed before
// TakePlans handed it out is cancelled: it is never handed out. Either way the pins and
// references of the transfer are released. An unknown id fails with ErrUnknownTransfer
// and changes nothing.
func (x *Index) CompleteTransfer(id TransferID, ok bool) (TransferResult, error) {
	ts := x.tiers
	if ts == nil {
		return TransferResult{}, ErrNoTiers
	}
	r, found := ts.takePlan(id)
	if !found {
		return TransferResult{}, fmt.Errorf("%w: %d", ErrUnknownTransfer, id)
	}
	x.beginTierEvents()
	res := TransferResult{Kind: r.kind, Blocks: len(r.ops), OK: ok}
	if len(r.ops) > 0 {
		res.From, res.To = r.ops[0].from, r.ops[0].to
	}
	bb := uint64(ts.cfg.BlockBytes)
	for _, op := range r.ops {
		res.Sources[op.from]++
		switch r.kind {
		case Store:
			if ok && ts.ents[op.e].st[op.to-1] != slotDoomed {
				x.slotResidentNow(op.to, op.e)
				ts.stats[op.to].Stored++
				ts.stats[op.to].BytesIn += bb
				ts.stats[op.from].BytesOut += bb
			} else {
				if op.from == Device && r.srcFreed {
					x.keepStreamFailed(op.src, op.e)
				} else if op.from != Device {
					keepFailedWriteBack(x, op.from, op.src)
				}
				x.dropSlot(op.to, op.e)
				ts.stats[op.to].StoreFailed++
			}
		case Load:
			en := &ts.ents[op.e]
			if ok {
				en.hits++
				en.touched[op.from-1] = x.clock.Now()
				ts.stats[op.from].Loaded++
				ts.stats[op.from].BytesOut += bb
				ts.stats[Device].BytesIn += bb
			} else {
				failSlot(x, op.from, en.slot[op.from-1]-1)
				ts.stats[op.from].LoadFailed++
			}
			x.unpinSlot(op.from, op.e)
			x.devUnpin(blocks.ID(op.dst), false)
		}
	}
	if r.kind == Store {
		// The sources go only once every destination is reported stored: a block moving
		// down a tier is never reported held by none.
		x.flushTierStored()
		for _, op := range r.ops {
			switch {
			case op.from != Device:
				x.unpinSlot(op.from, op.e)
			case !r.srcFreed:
				if !ok {
					x.keepFailedDemotion(blocks.ID(op.src))
				}
				x.devUnpin(blocks.ID(op.src), true)
			case ok && x.streamSourceKept(op.src, op.e):
				x.settleDemotion(nodeOf(blocks.ID(op.src))) // confirmed: it leaves the device now
			}
		}
	}
	ts.recycle(r)
	x.flushTierEvents()
	x.mutated()
	return res, nil
}

// PendingTransfers is the number of transfers prepared and not yet completed: handed out
// or not, with each store not yet in a plan counted on its own.
func (x *Index) PendingTransfers() int {
	if x.tiers == nil {
		return 0
	}
	return x.tiers.pending()
}

// Lower-tier events, for maintainers. Within CompleteTransfer, where a plan's blocks land
// together, and within TakePlans and Hold, whose copies make room in their tiers, they are
// collected (tierEvents) and emitted when the call returns: each run of
// blocks that chain (each the parent of the next, in one namespace) and entered one tier
// is one BlockStored, and the blocks that left one tier one BlockRemoved, as the device's
// events batch a commit, and as vLLM's BlockStored carries many block hashes. Stored events
// go first, so that a block moving down a tier is never reported held by none. A block
// is still reported once per tier it enters and once per tier it leaves. Elsewhere (a
// write-through copy's room made at commit) each is emitted at once.
type tierEvents struct {
	on      bool
	stored  []tierEv // entries that became resident, in completion order
	removed []tierEv // entries that left a tier, their hashes copied into rhash in order
	rhash   []byte
	hashes  []byte  // scratch of a stored run's hashes
	toks    []int32 // and of its tokens
}

type tierEv struct {
	t    Tier
	e, s int32
}

// emitTierStored reports entry e newly resident in lower tier t, at slot s.
func (x *Index) emitTierStored(t Tier, e, s int32) {
	ts := x.tiers
	if ts.ev.on {
		ts.ev.stored = append(ts.ev.stored, tierEv{t: t, e: e, s: s})
		return
	}
	x.emitTierStoredRun(t, []tierEv{{t: t, e: e, s: s}})
}

// emitTierStoredRun reports the entries of run, a chain in one namespace, newly resident
// in lower tier t: one event.
func (x *Index) emitTierStoredRun(t Tier, run []tierEv) {
	ts := x.tiers
	first := &ts.ents[run[0].e]
	hashes, toks, ids := ts.ev.hashes[:0], ts.ev.toks[:0], ts.evIDs[:0]
	for _, r := range run {
		off := int(r.e) * 2 * ts.hs
		hashes = append(hashes, ts.hash[off:off+ts.hs]...)
		toks = append(toks, ts.entryTokens(r.e, x.bs)...)
		ids = append(ids, blocks.ID(r.s))
	}
	ts.ev.hashes, ts.ev.toks, ts.evIDs = hashes, toks, ids
	ev := &x.evStored
	*ev = BlockStored{
		Hashes: hashes, HashSize: ts.hs, Blocks: ids,
		Tokens: toks, BlockSize: x.bs, Namespace: first.ns, Medium: ts.lv[t-1].spec.Medium,
	}
	if !first.first {
		off := int(run[0].e) * 2 * ts.hs
		ev.Parent = ts.hash[off+ts.hs : off+2*ts.hs]
	}
	x.obs.BlockStored(ev)
	*ev = BlockStored{}
}

// emitTierRemoved reports entry e leaving lower tier t's slot s.
func (x *Index) emitTierRemoved(t Tier, e, s int32) {
	ts := x.tiers
	off := int(e) * 2 * ts.hs
	if ts.ev.on {
		// The entry may be freed before the events go: its hash is kept here.
		ts.ev.removed = append(ts.ev.removed, tierEv{t: t, e: e, s: s})
		ts.ev.rhash = append(ts.ev.rhash, ts.hash[off:off+ts.hs]...)
		return
	}
	ts.evIDs = append(ts.evIDs[:0], blocks.ID(s))
	x.evRemoved = BlockRemoved{Hashes: ts.hash[off : off+ts.hs], HashSize: ts.hs, Blocks: ts.evIDs, Medium: ts.lv[t-1].spec.Medium}
	x.obs.BlockRemoved(&x.evRemoved)
	x.evRemoved = BlockRemoved{}
}

// beginTierEvents starts collecting lower-tier events (CompleteTransfer).
func (x *Index) beginTierEvents() {
	ev := &x.tiers.ev
	ev.on = x.obs != nil
	ev.stored, ev.removed, ev.rhash = ev.stored[:0], ev.removed[:0], ev.rhash[:0]
}

// flushTierEvents emits the collected events, batched: each chain of blocks that entered
// one tier, then the blocks that left each tier.
func (x *Index) flushTierEvents() {
	ts := x.tiers
	ev := &ts.ev
	if !ev.on {
		return
	}
	ev.on = false
	x.flushTierStored()
	for i := 0; i < len(ev.removed); {
		j := i + 1
		for j < len(ev.removed) && ev.removed[j].t == ev.removed[i].t {
			j++
		}
		ids := ts.evIDs[:0]
		for _, r := range ev.removed[i:j] {
			ids = append(ids, blocks.ID(r.s))
		}
		ts.evIDs = ids
		x.evRemoved = BlockRemoved{Hashes: ev.rhash[i*ts.hs : j*ts.hs], HashSize: ts.hs, Blocks: ids, Medium: ts.lv[ev.removed[i].t-1].spec.Medium}
		x.obs.BlockRemoved(&x.evRemoved)
		x.evRemoved = BlockRemoved{}
		i = j
	}
}

// flushTierStored emits the collected stored events, one per chain of blocks that entered
// one tier.
func (x *Index) flushTierStored() {
	ev := &x.tiers.ev
	for i := 0; i < len(ev.stored); {
		j := i + 1
		for j < len(ev.stored) && ev.stored[j].t == ev.stored[i].t && x.chains(ev.stored[j-1].e, ev.stored[j].e) {
			j++
		}
		x.emitTierStoredRun(ev.stored[i].t, ev.stored[i:j])
		i = j
	}
	ev.stored = ev.stored[:0]
}

// chains reports whether entry b continues entry a: its parent, in its namespace.
func (x *Index) chains(a, b int32) bool {
	ea, eb := &x.tiers.ents[a], &x.tiers.ents[b]
	return !eb.first && eb.parent == ea.key && eb.ns == ea.ns
}
