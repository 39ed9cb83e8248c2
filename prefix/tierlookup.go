package prefix

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
)

// lowerWalk walks p past cursor c (as Peek returned it) through the lower tiers' entries,
// calling visit with each block's entry and the fastest tier that holds it, for at most
// max blocks or until the limit, a block no lower tier holds, or a multimodal block. It
// returns the number of blocks visited.
func (x *Index) lowerWalk(p *Prompt, c Cursor, limit HitLimit, most int, visit func(e int32, t Tier)) int {
	if x.tiers == nil || (x.cfg.requireNS && p.Namespace == (Namespace{})) || len(p.MM) > 0 {
		return 0
	}
	var key uint64
	var ri rootInfo
	if c.node > 0 && int(c.node) < len(x.nodes) && x.nodes[c.node].gen == c.gen && x.nodes[c.node].flags&(flagCached|flagRoot) != 0 {
		key = x.nodes[c.node].key
		r := c.node
		for x.isBlock(r) {
			r = x.nodes[r].parent
		}
		ri = *x.root(r)
	} else if c.blocks == 0 && c.node >= 0 {
		// The namespace has no root on the device (or the root the cursor saw was freed
		// since, with its last block): its blocks may all be in lower tiers.
		key = fastRoot & x.cfg.keyMask
		if r := x.rootOf(p.Namespace); r != 0 {
			ri = *x.root(r)
		} else {
			ri = baseRootInfo(p.Namespace)
			x.ctl.epochMix(&ri)
		}
	} else {
		return 0
	}
	n := len(p.Tokens)
	if limit == LeaveOne {
		n--
	}
	full := n / x.bs
	got := 0
	for b := int(c.blocks); b < full && got < most; b++ {
		toks := p.Tokens[b*x.bs : (b+1)*x.bs : (b+1)*x.bs]
		k := x.childKey(key, toks, &ri, b == 0, nil)
		e := x.findEntry(k, key, toks)
		if e < 0 {
			break
		}
		t := x.tiers.ents[e].bestTier()
		if t == 0 {
			break
		}
		if visit != nil {
			visit(e, t)
		}
		got++
		key = k
	}
	return got
}

// PeekLower continues a lookup past the device: given the Cursor Peek returned for p
// (with the same limit), it reports the device prefix and, block by block after it, the
// fastest lower tier holding each block, until a block no tier holds or most blocks
// (most <= 0: no bound). Like Peek it takes
// nothing, touches nothing and counts nothing. Without lower tiers it reports the device
// prefix alone.
func (x *Index) PeekLower(p *Prompt, c Cursor, limit HitLimit, most int) TierHit {
	var h TierHit
	h.Blocks[Device] = max(int(c.blocks), 0)
	if most <= 0 {
		most = int(^uint(0) >> 1)
	}
	x.lowerWalk(p, c, limit, most, func(_ int32, t Tier) { h.Blocks[t]++; h.Lower++ })
	return h
}

// RecordTierLookup counts a lookup's hit per tier in TierStatsOf (HitBlocks): call it
// once per admitted request, as RecordLookup.
func (x *Index) RecordTierLookup(h TierHit) {
	if x.tiers == nil {
		return
	}
	for t := range x.NumTiers() {
		x.tiers.stats[t].HitBlocks += uint64(h.Blocks[t])
	}
}

// PrepareLoad prepares the promotion of the len(dst) blocks of p past cursor c (as
// PeekLower found them) into the device blocks dst, which the caller holds and has not
// committed: the sources stay pinned in their tiers and dst keep one more pool reference
// each until CompleteTransfer, and TakePlans hands the copy out. On success the caller
// commits dst only after the load completes ok; a failed load evicts the keys and the
// caller computes the blocks. It fails with ErrNoTiers without tiers, with ErrNotHeld for
// a dst block the caller does not hold or that is cached, with ErrInvalidArgument for one
// named twice or already the destination of a load in flight, and with ErrNotCached when fewer
// than len(dst) blocks are in the lower tiers, changing nothing.
func (x *Index) PrepareLoad(p *Prompt, c Cursor, limit HitLimit, dst []blocks.ID) (TransferID, error) {
	ts := x.tiers
	if ts == nil {
		return 0, ErrNoTiers
	}
	if err := x.checkLoadDst(dst); err != nil {
		return 0, err
	}
	if len(dst) == 0 {
		return 0, fmt.Errorf("%w: nothing to load", ErrInvalidArgument)
	}
	// One walk, collecting the blocks in scratch; nothing changes until all are found.
	ops := ts.walkBuf[:0]
	x.lowerWalk(p, c, limit, len(dst), func(e int32, t Tier) {
		ops = append(ops, tierOp{from: t, to: Device, e: e, src: ts.ents[e].slot[t-1] - 1, dst: int32(dst[len(ops)])})
	})
	ts.walkBuf = ops
	if len(ops) < len(dst) {
		return 0, fmt.Errorf("%w: %d of %d blocks in the lower tiers", ErrNotCached, len(ops), len(dst))
	}
	r := ts.newPlan(Load)
	for _, op := range ops {
		x.pinSlot(op.from, op.e)
	}
	r.ops = append(r.ops, ops...)
	// One plan per source tier, in tier order, then block order within it.
	sortOpsByTier(r.ops)
	if err := x.pool.Retain(dst...); err != nil {
		panic("kvpage: broken invariant: retaining held blocks failed: " + err.Error())
	}
	for _, id := range dst {
		ts.devRefs[id]++
	}
	ts.ready = append(ts.ready, r)
	x.mutated()
	return r.id, nil
}

// checkLoadDst checks PrepareLoad's destinations: each held, uncached, below the refcount
// limit, named once and in no load already in flight (two copies would land in it).
func (x *Index) checkLoadDst(dst []blocks.ID) error {
	ts := x.tiers
	err := error(nil)
	i := 0
	for ; i < len(dst); i++ {
		id := dst[i]
		switch {
		case id < 0 || int(id) >= x.nb || x.pool.RefCount(id) < 1 || x.IsCached(id):
			err = &BlockError{Op: "prepare load", ID: id, Err: ErrNotHeld}
		case x.pool.RefCount(id) == blocks.MaxRefCount:
			err = &BlockError{Op: "prepare load", ID: id, Err: blocks.ErrRefCountOverflow}
		case ts.devRefs[id] != 0: // -1: named earlier in dst; > 0: a load's destination
			err = &BlockError{Op: "prepare load", ID: id, Err: ErrInvalidArgument}
		}
		if err != nil {
			break
		}
		ts.devRefs[id] = -1 // an uncached held block's devRefs is 0 but while loading
	}
	for _, id := range dst[:i] {
		ts.devRefs[id] = 0
	}
	return err
}

// sortOpsByTier orders ops by source tier, keeping block order within a tier (an
// insertion sort: at most a request's blocks, nearly always one tier).
func sortOpsByTier(ops []tierOp) {
	for i := 1; i < len(ops); i++ {
		for j := i; j > 0 && ops[j].from < ops[j-1].from; j-- {
			ops[j], ops[j-1] = ops[j-1], ops[j]
		}
	}
}
