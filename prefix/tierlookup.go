package prefix

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
)

// lowerWalk walks p past cursor c (as Peek returned it) through the lower tiers' entries,
// appending to ops each block's copy source (its entry and the fastest tier holding it;
// the other fields are the caller's), for at most most blocks or until the limit or a
// block no lower tier holds (a multimodal block is found by its extra keys too, as on the
// device). It returns ops and the chained key the walk
// started from (the last device block's, or the namespace root's).
func (x *Index) lowerWalk(p *Prompt, c Cursor, limit HitLimit, most int, ops []tierOp) ([]tierOp, uint64) {
	key, ri, ok := x.lowerStart(p, c)
	if !ok {
		return ops, key
	}
	start := key
	n := len(p.Tokens)
	if limit == LeaveOne {
		n--
	}
	full := n / x.bs
	if len(p.MM) > 0 {
		return x.lowerWalkMM(p, int(c.blocks), full, most, key, &ri, ops), start
	}
	for b, got := int(c.blocks), 0; b < full && got < most; b, got = b+1, got+1 {
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
		ops = append(ops, tierOp{from: t, e: e})
		key = k
	}
	return ops, start
}

// lowerWalkMM is lowerWalk's loop for a prompt with multimodal inputs, from block b to
// full: a multimodal block's key folds in its extra keys, as on the device, and its
// entry's extra-key hash is verified with its parent and tokens. (A text block's key
// differs from any multimodal block's, so the text loop verifies parent and tokens only,
// as the device's text path does; it is kept apart so that it pays nothing for this.)
func (x *Index) lowerWalkMM(p *Prompt, b, full, most int, key uint64, ri *rootInfo, ops []tierOp) []tierOp {
	lo := 0 // blockMM's first input that may still overlap
	for got := 0; b < full && got < most; b, got = b+1, got+1 {
		toks := p.Tokens[b*x.bs : (b+1)*x.bs : (b+1)*x.bs]
		mm := x.blockMM(p, b, &lo)
		k := x.childKey(key, toks, ri, b == 0, mm)
		e := x.findEntry(k, key, toks)
		if e < 0 || x.tiers.ents[e].mmh != x.mmHash(mm) {
			break
		}
		t := x.tiers.ents[e].bestTier()
		if t == 0 {
			break
		}
		ops = append(ops, tierOp{from: t, e: e})
		key = k
	}
	return ops
}

// lowerStart is where a walk past cursor c starts: the chained key of the last device
// block and the namespace's root info, or ok false when p cannot continue into the tiers.
func (x *Index) lowerStart(p *Prompt, c Cursor) (key uint64, ri rootInfo, ok bool) {
	if x.tiers == nil || (x.cfg.requireNS && p.Namespace == (Namespace{})) || (len(p.MM) > 0 && !mmValid(p.MM)) {
		return 0, ri, false
	}
	if x.cursorOnDevice(c) {
		key = x.nodes[c.node].key
		r := c.node
		for x.isBlock(r) {
			r = x.nodes[r].parent
		}
		return key, *x.root(r), true
	}
	if c.blocks == 0 && c.node >= 0 {
		// The namespace has no root on the device (or the root the cursor saw was freed
		// since, with its last block): its blocks may all be in lower tiers.
		if r := x.rootOf(p.Namespace); r != 0 {
			ri = *x.root(r)
		} else {
			ri = baseRootInfo(p.Namespace)
			x.ctl.epochMix(&ri)
		}
		return fastRoot & x.cfg.keyMask, ri, true
	}
	return 0, ri, false
}

// cursorOnDevice reports whether cursor c still stands on the node it was placed on.
func (x *Index) cursorOnDevice(c Cursor) bool {
	return c.node > 0 && int(c.node) < len(x.nodes) && x.nodes[c.node].gen == c.gen && x.nodes[c.node].flags&(flagCached|flagRoot) != 0
}

// lowerPeek is the last PeekLower's walk, kept so that PrepareLoad, called with the same
// prompt, cursor and limit, need not walk again: the admission's lookup past the device
// and its load then hash and probe each block once. PrepareLoad takes it only when
// nothing it depends on can have changed (validLowerPeek); otherwise it walks again, so
// the result is always the walk's.
type lowerPeek struct {
	ok    bool
	toks  *int32 // p.Tokens as PeekLower saw it: its first element and length
	ntoks int
	ns    Namespace
	c     Cursor
	limit HitLimit
	onDev bool   // c stood on a device node
	start uint64 // the chained key the walk started from
	gen   uint64 // tierStore.gen then
	ops   []tierOp
}

// validLowerPeek reports whether the kept walk answers PrepareLoad(p, c, limit, dst) for
// n blocks: the same prompt (tokens by address and length, namespace; each block's tokens
// are compared again as they are used), cursor and limit; the cursor's node, and so the
// walk's start and its namespace's root, unchanged; no entry made or freed, no epoch
// bumped and no reset since (tierStore.gen); and at least n blocks found.
func (x *Index) validLowerPeek(p *Prompt, c Cursor, limit HitLimit, n int) bool {
	pk := &x.tiers.peek
	if !pk.ok || pk.gen != x.tiers.gen || pk.c != c || pk.limit != limit || n > len(pk.ops) ||
		len(p.Tokens) != pk.ntoks || len(p.Tokens) == 0 || &p.Tokens[0] != pk.toks || len(p.MM) > 0 || p.Namespace != pk.ns {
		return false
	}
	if on := x.cursorOnDevice(c); on != pk.onDev || (on && x.nodes[c.node].key != pk.start) {
		return false
	}
	return true
}

// PeekLower continues a lookup past the device: given the Cursor Peek returned for p
// (with the same limit), it reports the device prefix and, block by block after it, the
// fastest lower tier holding each block, until a block no tier holds or most blocks
// (most <= 0: no bound). Like Peek it takes nothing, touches nothing and counts nothing;
// it remembers its walk, which a PrepareLoad of the same prompt, cursor and limit uses
// instead of walking again. Without lower tiers it reports the device prefix alone.
func (x *Index) PeekLower(p *Prompt, c Cursor, limit HitLimit, most int) TierHit {
	var h TierHit
	h.Blocks[Device] = max(int(c.blocks), 0)
	ts := x.tiers
	if ts == nil {
		return h
	}
	if most <= 0 {
		most = int(^uint(0) >> 1)
	}
	pk := &ts.peek
	var start uint64
	pk.ops, start = x.lowerWalk(p, c, limit, most, pk.ops[:0])
	for _, op := range pk.ops {
		h.Blocks[op.from]++
	}
	h.Lower = len(pk.ops)
	pk.ok = len(p.Tokens) > 0
	if pk.ok {
		pk.toks, pk.ntoks, pk.ns, pk.c, pk.limit = &p.Tokens[0], len(p.Tokens), p.Namespace, c, limit
		pk.onDev, pk.start, pk.gen = x.cursorOnDevice(c), start, ts.gen
	}
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
	// The blocks, collected in scratch; nothing changes until all are found. PeekLower's
	// walk gives them when it still holds; otherwise they are walked again.
	ops := ts.walkBuf[:0]
	if x.validLowerPeek(p, c, limit, len(dst)) {
		b := int(c.blocks)
		for _, op := range ts.peek.ops[:len(dst)] {
			t := ts.ents[op.e].bestTier()
			if t == 0 || !sameTokens(ts.entryTokens(op.e, x.bs), p.Tokens[b*x.bs:(b+1)*x.bs]) {
				ops = ops[:0]
				break
			}
			ops = append(ops, tierOp{from: t, e: op.e})
			b++
		}
	}
	if len(ops) == 0 {
		ops, _ = x.lowerWalk(p, c, limit, len(dst), ops)
	}
	ts.peek.ok = false
	for i := range ops {
		op := &ops[i]
		op.to, op.src, op.dst = Device, ts.ents[op.e].slot[op.from-1]-1, int32(dst[i])
	}
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
