package prefix

import (
	"fmt"
	"slices"

	"github.com/kvpage/kvpage/blocks"
)

// PrepareStore prepares the copy of device block b into tier 1 (a write-through copy, a
// demotion, a swap), for the (node, group) b is cached for, unless a lower tier already
// holds or receives that entry (HeldBelow), tier 1's slot of it is a failed load's still
// read by other copies, or tier 1 has no room. It reports whether it prepared the
// copy; the owner then holds one more reference on b (TransferRefs) until
// CompleteTransfer hands b back, so that b is neither evicted nor reused meanwhile.
// TakePlans hands the copy out. The copy's slot starts with b's uses on the device
// (SetDeviceHits), which the tier's policy reads.
func (t *GroupTree) PrepareStore(b blocks.ID) bool {
	ts := t.tiers
	if ts == nil {
		return false
	}
	e, ok := t.Entry(b)
	if !ok || t.HeldBelow(e.Node, e.Group) || t.tier1Busy(e.Node, e.Group) {
		return false
	}
	s, ok := t.reserveSlot(1, e.Node, e.Group)
	if !ok {
		return false
	}
	ts.devRefs[b]++
	ts.lv[0].hits[s] = max(ts.devHits[b], 1) // its count once resident (CompleteTransfer)
	ts.queue = append(ts.queue, tierOp{from: Device, to: 1, src: int32(b), dst: s})
	return true
}

// GroupLoad is one block of a load: group Group's block at node Node, from the fastest
// lower tier holding it, into device block Dst.
type GroupLoad struct {
	Node  Node
	Group int
	Dst   blocks.ID
}

// PrepareLoad prepares the promotion of loads' blocks into their device blocks, which
// the owner holds, has not cached, and holds once more for the load until
// CompleteTransfer hands them back: the sources stay pinned in their tiers, and TakePlans
// hands the load out as one Plan per source tier, all with the returned ID. It fails,
// changing nothing, with ErrNoTiers without tiers, ErrInvalidArgument for no loads or a
// destination out of the pool, cached, named twice or already a load's, and ErrNotCached
// for a (node, group) no lower tier holds.
func (t *GroupTree) PrepareLoad(loads []GroupLoad) (TransferID, error) {
	ts := t.tiers
	if ts == nil {
		return 0, ErrNoTiers
	}
	if len(loads) == 0 {
		return 0, fmt.Errorf("%w: nothing to load", ErrInvalidArgument)
	}
	var err error
	i := 0
	for ; i < len(loads); i++ {
		ld := loads[i]
		d := ld.Dst
		switch {
		case uint(d)-1 >= uint(len(ts.devRefs))-1 || t.IsCached(d) || ts.devRefs[d] != 0:
			err = &BlockError{Op: "prepare load", ID: d, Err: ErrInvalidArgument}
		case !t.isPrefixNode(ld.Node) || t.LowerTier(ld.Node, ld.Group) == Device:
			err = &BlockError{Op: "prepare load", ID: d, Err: ErrNotCached}
		}
		if err != nil {
			break
		}
		ts.devRefs[d] = -1 // named once; a destination's devRefs is 0 until it loads
	}
	for _, ld := range loads[:i] {
		ts.devRefs[ld.Dst] = 0
	}
	if err != nil {
		return 0, err
	}
	r := ts.newPlan(Load)
	for _, ld := range loads {
		tier := t.LowerTier(ld.Node, ld.Group)
		s := ts.lv[tier-1].at[int(ld.Node)*t.ng+ld.Group] - 1
		t.pinSlot(tier, s)
		r.ops = append(r.ops, tierOp{from: tier, to: Device, src: s, dst: int32(ld.Dst)})
		ts.devRefs[ld.Dst]++
	}
	sortOpsByTier(r.ops)
	ts.ready = append(ts.ready, r)
	return r.id, nil
}

// TakePlans appends to dst every transfer prepared since the last call as plans (stores
// into each tier coalesced into runs, then the loads), and returns dst. The owner starts
// its device-side stores (write-back ahead of need, hits) before calling it. Plans' Runs
// stay valid until their transfer completes. Under TierConfig.StreamOrdered the server
// issues a plan's copies before anything writes their device blocks again, so a store's
// device sources are reusable once it is handed out: TakePlans drops their transfer
// references here (TransferRefs), the owner releases its own on the blocks of the Store
// plans from Device it appended (their Runs' sources), and CompleteTransfer hands them
// back no more.
func (t *GroupTree) TakePlans(dst []Plan) []Plan {
	ts := t.tiers
	if ts == nil {
		return dst
	}
	from := len(dst)
	dst = ts.flushStores(dst, ts.cfg.BlockBytes, &ts.stats, t.matchSlots)
	if ts.cfg.StreamOrdered {
		t.releaseStoreSources(dst[from:])
	}
	return ts.flushReady(dst, ts.cfg.BlockBytes, &ts.stats)
}

// releaseStoreSources drops, as the plans are handed out, the transfer references the
// stores of plans hold on their device sources (TierConfig.StreamOrdered), as an Index's
// tiers do (Index.releaseStoreSources).
func (t *GroupTree) releaseStoreSources(plans []Plan) {
	ts := t.tiers
	for _, src := range ts.takeStoreSources(plans) {
		ts.devRefs[src]--
	}
}

// matchSlots gives ops (stores into one tier, sorted by source) their reserved slots in
// ascending order, so that consecutive sources land in consecutive slots: the slots are
// pending reservations alike, so which (node, group) takes which is free to choose, its
// state (pending, or doomed by a failed load: failSlot) moving with it. A held slot keeps
// its (node, group): a hold names the slot itself (holdRef), so moving another (node,
// group) into it would hold that one instead. (Before, it moved, and a hold's own copies
// could end up holding each other's blocks.)
func (t *GroupTree) matchSlots(ops []tierOp) {
	ts := t.tiers
	l := &ts.lv[ops[0].to-1]
	slots, nodes, grps, sts := ts.slotBuf[:0], ts.nodeBuf[:0], ts.grpBuf[:0], ts.stBuf[:0]
	for _, op := range ops {
		if l.holds[op.dst] == 0 {
			slots = append(slots, op.dst)
			nodes, grps, sts = append(nodes, l.node[op.dst]), append(grps, l.group[op.dst]), append(sts, l.st[op.dst])
		}
	}
	slices.Sort(slots)
	j := 0
	for i := range ops {
		if l.holds[ops[i].dst] != 0 {
			continue
		}
		s := slots[j]
		ops[i].dst = s
		l.node[s], l.group[s], l.st[s] = nodes[j], grps[j], sts[j]
		l.at[int(nodes[j])*t.ng+int(grps[j])] = s + 1
		j++
	}
	ts.slotBuf, ts.nodeBuf, ts.grpBuf, ts.stBuf = slots, nodes, grps, sts
}

// CompleteTransfer confirms transfer id with the server's outcome, and appends to dev the
// device blocks the transfer held (a store's sources, a load's destinations), whose
// reference the owner now releases. ok: a store's destination holds the block; a load's
// destinations hold the KV (the owner caches them). Failed: a store's destination is
// dropped (the source of a write-back between lower tiers stays, ranked as used now; a
// stream-ordered store's block the owner evicted meanwhile, with no copy below, is
// counted in the device's Lost); a load's source keys are evicted from their tiers, and
// the owner computes those blocks. A failed load also means its sources' bytes are bad,
// as in an Index (Index.CompleteTransfer): a copy between lower tiers reading one of them
// still in flight lands nowhere when it completes, ok or not (counted in StoreFailed),
// while one confirmed before stands. A load completed before TakePlans handed it out is
// cancelled. An unknown id fails with ErrUnknownTransfer and changes nothing. The result's Sources count the blocks read
// from each tier; the lower-tier events are batched (FlushTierEvents).
func (t *GroupTree) CompleteTransfer(id TransferID, ok bool, dev []blocks.ID) (TransferResult, []blocks.ID, error) {
	ts := t.tiers
	if ts == nil {
		return TransferResult{}, dev, ErrNoTiers
	}
	r, found := ts.takePlan(id)
	if !found {
		return TransferResult{}, dev, fmt.Errorf("%w: %d", ErrUnknownTransfer, id)
	}
	t.BatchTierEvents()
	res := TransferResult{Kind: r.kind, Blocks: len(r.ops), OK: ok}
	if len(r.ops) > 0 {
		res.From, res.To = r.ops[0].from, r.ops[0].to
	}
	bb := uint64(ts.cfg.BlockBytes)
	for _, op := range r.ops {
		res.Sources[op.from]++
		// A store whose source a failed load found bad since lands nowhere (failSlot).
		opOK := ok && (r.kind != Store || ts.lv[op.to-1].st[op.dst] != slotDoomed)
		countDone(&ts.stats, r.kind, op, opOK, bb)
		switch {
		case r.kind == Store && opOK:
			// A copy from the device keeps the count PrepareStore gave its slot, the
			// block's device uses then (a stream-ordered source may hold other content
			// by now); one between lower tiers keeps the source slot's count.
			hits := ts.lv[op.to-1].hits[op.dst]
			if op.from != Device {
				hits = ts.lv[op.from-1].hits[op.src]
			}
			t.slotResidentNow(op.to, op.dst, hits)
		case r.kind == Store:
			if op.from == Device && r.srcFreed {
				t.countStreamLost(op.dst)
			} else if op.from != Device {
				keepFailedWriteBack(t, op.from, op.src)
			}
			t.dropSlot(op.to, op.dst)
		case ok:
			l := &ts.lv[op.from-1]
			l.touched[op.src] = ts.clock.Tick()
			l.hits[op.src]++ // a load is a use (the slot is pinned: its policy sees it at unpinSlot)
			// The loaded block's device uses start at its content's, as an Index's promoted
			// node takes its entry's hits (the owner keeps them as it caches the block).
			ts.devHits[op.dst] = l.hits[op.src]
		default:
			failSlot(t, op.from, op.src)
		}
		switch {
		case r.kind == Load:
			t.unpinSlot(op.from, op.src)
			ts.devRefs[op.dst]--
			dev = append(dev, blocks.ID(op.dst))
		case op.from == Device && r.srcFreed:
			// released when TakePlans handed it out (StreamOrdered)
		case op.from == Device:
			ts.devRefs[op.src]--
			dev = append(dev, blocks.ID(op.src))
		default:
			t.unpinSlot(op.from, op.src)
		}
	}
	ts.recycle(r)
	t.FlushTierEvents()
	return res, dev, nil
}

// countStreamLost counts in the device's Lost the block of a failed stream-ordered store
// into tier 1's slot s whose device copy is gone: the owner evicted it after TakePlans
// handed the store out (CountDeviceEviction counted it in flight, not lost), and no lower
// tier holds it. As an Index's tiers count it (Index.keepStreamFailed).
func (t *GroupTree) countStreamLost(s int32) {
	l := &t.tiers.lv[0]
	n, g := l.node[s], int(l.group[s])
	if t.First(n, g) == blocks.NullID && !t.residentBelow(1, n, g) {
		t.tiers.stats[Device].Lost++
	}
}

// countDone counts one block of a completed transfer in stats: a store into its
// destination tier (and out of its source), a load out of its source tier (and into the
// device), or the failure of either.
func countDone(stats *[MaxTiers]TierStats, kind TransferKind, op tierOp, ok bool, bb uint64) {
	switch {
	case kind == Store && ok:
		stats[op.to].Stored++
		stats[op.to].BytesIn += bb
		stats[op.from].BytesOut += bb
	case kind == Store:
		stats[op.to].StoreFailed++
	case ok:
		stats[op.from].Loaded++
		stats[op.from].BytesOut += bb
		stats[Device].BytesIn += bb
	default:
		stats[op.from].LoadFailed++
	}
}
