package prefix

// Hashes and events, for maintainers.
//
// Each cached block has a chained hash for events: by default Fast64 (64-bit,
// non-cryptographic, the same everywhere, so a router can recompute it), computed and
// stored at Commit only when an Observer is set (Hash recomputes it otherwise, so the
// default costs no extra memory); SHA256 or any Hasher (prefix/vllmhash has vLLM's
// sha256_cbor) are computed at Commit and stored beside the tree. A Hasher sees the parent hash, the tokens and the Extra keys in vLLM's
// order (LoRA name, multimodal hashes, cache salt on a namespace's first block only). An
// Observer receives BlockStored (one event per Commit that stores, the new blocks as one
// chain), BlockRemoved (one per eviction batch) and AllBlocksCleared (Reset), synchronously
// and in order; with no Observer nothing is computed for events.

import "github.com/kvpage/kvpage/blocks"

// hashChain computes, with the configured (non-default) hasher, the event hashes of the
// new blocks ids, which start at block b0 of p and chain under node parent.
func (x *Index) hashChain(parent int32, b0 int, p *Prompt, ids []blocks.ID) {
	hs := x.hashSize
	prev := x.rootHash
	if x.isBlock(parent) {
		off := int(blockOf(parent)) * hs
		prev = x.hashes[off : off+hs]
	}
	mmLo := 0
	for i, id := range ids {
		b := b0 + i
		e := x.extraOf(p.Namespace, b == 0, x.blockMM(p, b, &mmLo))
		off := int(id) * hs
		dst := x.hashes[off : off+hs]
		x.hasher.Block(dst, prev, p.Tokens[b*x.bs:(b+1)*x.bs], e)
		prev = dst
	}
}

// emitStored reports the new chain ids (blocks b0.. of p, under node parent).
func (x *Index) emitStored(parent int32, b0 int, p *Prompt, ids []blocks.ID) {
	hs := x.hashSize
	buf := x.hashBuf[:0]
	if x.isBlock(parent) {
		buf = x.appendHash(buf, parent)
	}
	np := len(buf)
	for _, id := range ids {
		buf = x.appendHash(buf, nodeOf(id))
	}
	x.hashBuf = buf
	e := &x.evStored // reused: an event passed to an interface would escape each time
	*e = BlockStored{
		Hashes:    buf[np:],
		HashSize:  hs,
		Blocks:    ids,
		Tokens:    p.Tokens[b0*x.bs : (b0+len(ids))*x.bs],
		BlockSize: x.bs,
		Namespace: p.Namespace,
	}
	if np > 0 {
		e.Parent = buf[:np]
	}
	if len(p.MM) > 0 {
		e.MM, e.MMOffsets = x.collectMM(b0, len(ids), p)
	}
	x.obs.BlockStored(e)
	*e = BlockStored{}
}

// collectMM returns each block's multimodal keys for blocks b0..b0+n of p, and in the
// (identifier, offset) form their offsets, or nils if no block has any. The lists share
// scratch memory, valid during the event only.
func (x *Index) collectMM(b0, n int, p *Prompt) ([][]string, [][]int) {
	flat, offs := x.mmFlat[:0], x.offFlat[:0]
	mmLo, any := 0, false
	for b := b0; b < b0+n; b++ {
		for _, k := range x.blockMM(p, b, &mmLo) {
			flat, offs = append(flat, k.id), append(offs, k.off)
			any = true
		}
	}
	x.mmFlat, x.offFlat = flat, offs
	if !any {
		return nil, nil
	}
	pairs := x.cfg.mmForm == MMKeyIdentifierOffset
	lists, offLists := x.mmLists[:0], x.offLists[:0]
	mmLo, at := 0, 0
	for b := b0; b < b0+n; b++ {
		k := len(x.blockMM(p, b, &mmLo))
		lists = append(lists, flat[at:at+k:at+k])
		if pairs {
			offLists = append(offLists, offs[at:at+k:at+k])
		}
		at += k
	}
	x.mmLists, x.offLists = lists, offLists
	if !pairs {
		return lists, nil
	}
	return lists, offLists
}

// emitRemoved reports evicted blocks whose hashes were collected in hashBuf.
func (x *Index) emitRemoved(ids []blocks.ID, hashes []byte) {
	x.evRemoved = BlockRemoved{Hashes: hashes, HashSize: x.hashSize, Blocks: ids}
	x.obs.BlockRemoved(&x.evRemoved)
	x.evRemoved = BlockRemoved{}
}
