package prefix

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"
)

// Duplicates and stale cursors, for maintainers.
//
// When Commit is given a block whose tokens (and extra keys) are already cached under the
// same parent as another block, the index keeps its existing copy and touches it; the
// caller's block is left alone: not cached, still held by the caller, valid in its table,
// and back to the pool when the caller releases it. The cursor moves onto the existing copy
// so later blocks chain under it. The caller does not hold that copy, so it may be evicted
// before the caller's next Commit; the cursor notices (a generation per node), walks the
// prompt from the root to find the path again, and if it is gone leaves the rest of the
// sequence's blocks uncached (CommitResult.Orphaned). No table ever points at a freed block.
// A live cursor used with another namespace's prompt fails with ErrInvalidCursor; a stale
// one cannot be told apart from its namespace's own (its root may be gone) and is walked
// under the prompt's namespace, which is where its blocks belong.

// Commit caches the caller's full blocks ids, whose tokens are tokens (len(ids) x block
// size) starting at the cursor's position in p (p supplies the namespace and multimodal
// inputs; tokens must equal p.Tokens[cur.Blocks()*B : (cur.Blocks()+len(ids))*B]), and
// advances the cursor. The caller keeps its own references. See CommitResult for duplicates.
//
// Each block is, in order of ids, one of:
//   - new: cached as a child of the previous block; the index takes one reference on it;
//   - present: this very block is already cached here; only touched;
//   - a duplicate: another block with the same tokens and extra keys is cached here. The
//     index keeps that copy (touched) and the cursor moves onto it; the caller's block is
//     left alone, uncached, and goes back to the pool when the caller releases it;
//   - orphaned: the prefix it extends was evicted since (see CommitResult.Orphaned).
//
// All or nothing: a block the caller does not hold (ErrNotHeld), a block cached elsewhere
// or given twice (ErrAlreadyCached), a prompt too short (ErrLengthMismatch), the zero
// Namespace in an index that requires one (ErrEmptyNamespace) fail and change nothing.
func (x *Index) Commit(cur *Cursor, p *Prompt, ids []blocks.ID) (CommitResult, error) {
	return x.commit(cur, p, ids, false)
}

// commitHeld is Commit for blocks the caller holds, each once, none cached off the
// cursor's path (internal/trusted: a Manager's own table). It skips the per-block checks
// that the caller holds each block and lists it once, which that invariant makes unable to
// fail, and takes the index's references in its own pass (internal/poolrefs). Under
// -tags kvinvariants the checks run anyway and panic.
func (x *Index) commitHeld(cur *Cursor, p *Prompt, ids []blocks.ID) (CommitResult, error) {
	if len(ids) == 1 && !invariant.Enabled {
		if at := x.leafToExtend(cur, p, ids[0]); at != 0 {
			return x.commitUnderLeaf(cur, p, ids, at), nil
		}
	}
	return x.commit(cur, p, ids, true)
}

// leafToExtend returns the node of cur when committing the one block id there is a
// decode step's commit, which commit would treat as commitUnderLeaf does: 16-token text
// blocks, no quota, no retention ranges or first time limit, a live cursor at a block with
// no children (so nothing to find under it: the block is new), and id a block not cached.
// Else it returns 0 and commit runs, which also returns every error. These are the
// prompt's checks; extendable makes the rest.
func (x *Index) leafToExtend(cur *Cursor, p *Prompt, id blocks.ID) int32 {
	if len(p.MM) != 0 || len(p.RetentionRanges) != 0 || (x.until == nil && p.Retention.Until != 0) ||
		(x.cfg.requireNS && p.Namespace == (Namespace{})) || cur.root != x.rootOf(p.Namespace) {
		return 0
	}
	return x.extendable(cur, len(p.Tokens), id)
}

// extendable is leafToExtend's checks of the index, the cursor and id, for a prompt of
// ntok tokens. That id is not cached it reads from the pool's count of its holders, not
// from its node: the caller holds it, and a cached block is held by the index too
// (CheckInvariants), so a count of one is the caller's alone; the node's pair is then
// written, never read (see node). A block with other holders takes commit's general
// path, which looks.
func (x *Index) extendable(cur *Cursor, ntok int, id blocks.ID) int32 {
	n := cur.node
	if x.bs != 16 || x.ctl.quota != nil || uint(n-1) >= uint(x.nb) || uint(id) >= uint(x.nb) ||
		(int(cur.blocks)+1)*16 > ntok {
		return 0
	}
	if nd := &x.nodes[n]; nd.gen != cur.gen || nd.flags&flagCached == 0 || nd.children != 0 || x.refs[id] != 1 {
		return 0
	}
	return n
}

// commitNext is trusted.CommitNext: commitHeld's decode-step path for a Manager's
// sequence whose prompt is plain (the default namespace, no multimodal inputs, no
// retention, no retention ranges), given its tokens rather than its Prompt. A Manager's
// record keeps its prompt on two lines of its own that a decode step never reads, and a
// decode commit of a plain prompt needs nothing from them: leafToExtend's prompt checks
// all pass for it but the namespace's root, which is the default one. Where the index
// needs the prompt (an observer's or the events' hashes, lower tiers) or commit would
// refuse (a namespace required), or under -tags kvinvariants, it reports false and
// changes nothing, and the caller commits through commitHeld.
func (x *Index) commitNext(cur *Cursor, tokens []int32, id blocks.ID) bool {
	if invariant.Enabled || x.hashes != nil || x.obs != nil || x.tiers != nil || x.cfg.requireNS ||
		cur.root != x.defRoot {
		return false
	}
	at := x.extendable(cur, len(tokens), id)
	if at == 0 {
		return false
	}
	start := int(cur.blocks)
	n := x.extend(cur, (*[16]int32)(tokens[start*16:(start+1)*16]), Retention{}, id, at)
	x.extended(cur, n, start)
	return true
}

// commitUnderLeaf is commit(cur, p, ids, true) for the case leafToExtend found: one new
// block under the cursor's leaf at, the sequence's next block under its last one, which a
// decode step commits every 16 tokens. It makes the same tick and the same writes as
// commit, without resolve's, planCommit's and commit's general passes, and is
// insertChain's loop for that one block written out: no multimodal keys, retention
// ranges or quota, and a parent with no child, so none of their branches and no loop
// (TestCommitUnderLeafMatchesCommit runs it and commit in lockstep; a change to
// insertChain's per-block steps belongs in extend).
func (x *Index) commitUnderLeaf(cur *Cursor, p *Prompt, ids []blocks.ID, at int32) CommitResult {
	start := int(cur.blocks)
	n := x.extend(cur, (*[16]int32)(p.Tokens[start*16:(start+1)*16]), p.Retention, ids[0], at) // leafToExtend checked the length
	if x.hashes != nil {
		x.hashChain(at, start, p, ids)
	}
	if x.obs != nil {
		x.emitStored(at, start, p, ids)
	}
	if x.tiers != nil {
		x.tierCommitted(ids)
	}
	x.extended(cur, n, start)
	return CommitResult{Stored: 1}
}

// extend caches block id, whose tokens are src, with retention r, as the only child of
// the cursor's leaf at, and returns its node: commitUnderLeaf's and commitNext's writes.
func (x *Index) extend(cur *Cursor, src *[16]int32, r Retention, id blocks.ID, at int32) int32 {
	pn := &x.nodes[at]
	key := x.key16(pn.key, src, x.root(cur.root), cur.blocks == 0)
	t := x.tick()
	if x.refs[id] >= blocks.MaxRefCount { // held by the caller, so not free
		panic("kvpage: broken invariant: a trusted commit of a block with MaxRefCount holders")
	}
	x.refs[id]++
	n := nodeOf(id)
	nd := &x.nodes[n]
	nd.key, nd.lastAccess, nd.parent = key, t, at
	nd.children, nd.pinnedKids, nd.hint = 0, 0, 0
	nd.gen = x.newGen() // a new incarnation: cursors at the evicted one stay stale
	nd.hits = 1
	nd.flags = flagCached
	x.retain(n, r)
	nd.tok = *src
	x.cached++
	if pn.flags&flagPinned == 0 {
		x.evRemoveSlow(at) // an unpinned leaf until now (leafToExtend: no children)
	}
	pn.children++
	if pn.hint == 0 {
		pn.hint = n // the hint child is not in the table (see Index.nodes)
	} else {
		x.table.insert(n, key)
	}
	if pn.flags&flagPinned != 0 {
		nd.flags |= flagPinned
		x.pinned++
		pn.pinnedKids++
	} else {
		x.pin(n)
	}
	return n
}

// extended moves the cursor onto node n, the extension of its block start, and counts
// the insert.
func (x *Index) extended(cur *Cursor, n int32, start int) {
	x.stats.inserts++
	*cur = Cursor{node: n, blocks: int32(start + 1), gen: x.nodes[n].gen, root: cur.root}
	x.mutated()
}

// commit is Commit; held skips the checks the caller's invariant makes redundant (see
// commitHeld).
func (x *Index) commit(cur *Cursor, p *Prompt, ids []blocks.ID, held bool) (CommitResult, error) {
	var res CommitResult
	if x.cfg.requireNS && p.Namespace == (Namespace{}) {
		return res, ErrEmptyNamespace
	}
	if len(p.MM) > 0 && !mmValid(p.MM) {
		return res, fmt.Errorf("%w: multimodal inputs out of Offset order, or with a negative or overflowing offset or length", ErrInvalidArgument)
	}
	// A caller's own Commit has its priorities checked; a Manager's (held) were checked
	// at Admit, so the decode step's commit pays nothing for it.
	if !held {
		if err := p.validateRetention(); err != nil {
			return res, err
		}
	}
	start := int(cur.blocks)
	if need := (start + len(ids)) * x.bs; need > len(p.Tokens) {
		return res, &LengthError{Need: need, Have: len(p.Tokens)}
	}
	at, err := x.resolve(cur, p)
	if err != nil {
		return res, err
	}
	if !held || invariant.Enabled {
		if err := x.checkCommitted(ids); err != nil {
			if held {
				panic("kvpage: broken invariant: a trusted commit: " + err.Error())
			}
			return res, err
		}
	}
	if len(ids) == 0 {
		return res, nil
	}
	if at == detached {
		res.Orphaned = len(ids)
		cur.blocks += int32(len(ids))
		return res, nil
	}
	created := at == 0
	if created {
		at = x.ensureRoot(p.Namespace) // a new namespace, dropped again if the plan fails
	}
	root := x.rootOf(p.Namespace)
	newFrom, err := x.planCommit(at, root, start, p, ids, !held || invariant.Enabled)
	if err != nil {
		if created {
			x.dropRoot(p.Namespace)
		}
		return res, err
	}
	t := x.tick()
	if x.until == nil && p.needsUntil() {
		x.until = make([]uint64, x.nb+1) // on the first time limit asked for; block nodes only
	}
	for i := 0; i < newFrom; i++ {
		c := x.nodeBuf[i]
		if c == nodeOf(ids[i]) {
			res.Present++
		} else {
			res.Duplicates++
			x.nodes[c].hits++
		}
		if r := p.retentionAt(start+i, x.bs, t); r.Priority != 0 {
			x.retain(c, r)
		}
		x.touch(c, t)
		at = c
	}
	if newFrom < len(ids) {
		at = x.insertChain(at, start, p, ids, newFrom, t, held)
		res.Stored = len(ids) - newFrom
	}
	x.stats.inserts += uint64(res.Stored)
	x.stats.duplicates += uint64(res.Duplicates)
	if x.ctl.quota != nil && res.Stored > 0 {
		x.enforceQuota(at)
	}
	*cur = Cursor{node: at, blocks: int32(start + len(ids)), gen: x.nodes[at].gen, root: root}
	x.mutated()
	return res, nil
}

// checkCommitted fails unless the caller holds every block of ids (a cached one beyond the
// index's own reference) and a new block can take the index's reference.
func (x *Index) checkCommitted(ids []blocks.ID) error {
	for _, id := range ids {
		if id < 0 || int(id) >= x.nb || x.pool.RefCount(id) < 1 || (x.IsCached(id) && x.pool.RefCount(id) < 2) {
			return &BlockError{Op: "commit", ID: id, Err: ErrNotHeld}
		}
		if x.pool.RefCount(id) == blocks.MaxRefCount && !x.IsCached(id) {
			return &BlockError{Op: "commit", ID: id, Err: blocks.ErrRefCountOverflow}
		}
	}
	return nil
}

// resolve returns the node a cursor stands on: 0 for the zero cursor (the root of p's
// namespace, not created yet), detached, or a node still in the tree. A cursor whose node
// left the tree (an evicted block, or a namespace root freed and maybe reused by another
// namespace since; either bumps the node's generation) is found again by walking p from
// its namespace's current root; if that path is gone too, the cursor is detached, except
// that a cursor at a freed root resolves like the zero cursor (the root is recreated).
func (x *Index) resolve(cur *Cursor, p *Prompt) (int32, error) {
	switch n := cur.node; {
	case n == 0:
		if cur.blocks != 0 {
			return 0, ErrInvalidCursor
		}
		return x.rootOf(p.Namespace), nil
	case n == detached:
		return detached, nil
	case n < 0 || int(n) >= len(x.nodes):
		return 0, ErrInvalidCursor
	case x.nodes[n].gen == cur.gen && x.nodes[n].flags&(flagCached|flagRoot) != 0:
		// A live node of the generation the cursor saw lies under the very root the cursor
		// was placed under (a root is freed only when childless, and freeing bumps its
		// generation), so cur.root names the cursor's namespace.
		if cur.root != x.rootOf(p.Namespace) {
			return 0, ErrInvalidCursor // a cursor of another namespace
		}
		return n, nil
	}
	if x.isRootSlot(cur.root) && x.root(cur.root).retired {
		return 0, ErrInvalidCursor // a cursor of an earlier weight epoch (epoch.go)
	}
	r := x.rootOf(p.Namespace)
	if r == 0 {
		if cur.blocks == 0 {
			return 0, nil // a cursor at a freed root: Commit recreates it
		}
		return detached, nil
	}
	ri := x.root(r)
	at, key, mmLo := r, x.nodes[r].key, 0
	for b := 0; b < int(cur.blocks); b++ {
		toks := p.Tokens[b*x.bs : (b+1)*x.bs]
		mm := x.blockMM(p, b, &mmLo)
		k := x.childKey(key, toks, ri, b == 0, mm)
		if at = x.findChild(at, k, toks, mm); at == 0 {
			return detached, nil
		}
		key = k
	}
	return at, nil
}

// planCommit walks the blocks of a commit without changing anything: it records in keyBuf
// each block's key and in nodeBuf the cached node it lands on (present or duplicate), and
// returns the index of the first block to insert (len(ids) if none). It rejects blocks that
// are cached elsewhere or repeated among the new ones; without marks it does not look for
// repeated blocks (a caller's invariant: commitHeld).
func (x *Index) planCommit(at, root int32, start int, p *Prompt, ids []blocks.ID, marks bool) (int, error) {
	ri := x.root(root)
	keys := slices.Grow(x.keyBuf[:0], len(ids))[:len(ids)] // keys[i]: no append per block
	x.keyBuf, x.nodeBuf = keys, x.nodeBuf[:0]
	bs, tokens := x.bs, p.Tokens // locals: the stores below would make x.bs a load each time
	key, mmLo := x.nodes[at].key, 0
	newFrom := len(ids)
	var src [][16]int32 // 16-token text blocks: the prompt's blocks
	if x.bs == 16 && len(p.MM) == 0 {
		// Sound only because commit returned its LengthError for a prompt shorter than
		// (start+len(ids)) x bs tokens before calling this: the slice expression below
		// checks n*16 against the capacity of p.Tokens, not its length, and unsafe.Slice
		// checks nothing. n >= 1: commit returns before planning an empty ids.
		n := start + len(ids)
		src = unsafe.Slice((*[16]int32)(tokens[:n*16]), n)
	}
	for i, id := range ids {
		b := start + i
		var k uint64
		var toks []int32
		var mm []mmKey
		if src != nil {
			t := &src[b]
			k, toks = x.key16(key, t, ri, b == 0), t[:]
		} else {
			toks = tokens[b*bs : (b+1)*bs : (b+1)*bs]
			if len(p.MM) > 0 { // text prompts, the common case, skip the call
				mm = x.blockMM(p, b, &mmLo)
			}
			k = x.childKey(key, toks, ri, b == 0, mm)
		}
		keys[i] = k
		key = k
		if newFrom == len(ids) {
			// A node without children has none to find: the common commit, a sequence's
			// next block under its last one, skips the probe and the table line it reads.
			if x.nodes[at].children != 0 {
				if c := x.findChild(at, k, toks, mm); c != 0 {
					if c != nodeOf(id) && x.IsCached(id) {
						return 0, &BlockError{Op: "commit", ID: id, Err: ErrAlreadyCached}
					}
					x.nodeBuf = append(x.nodeBuf, c)
					at = c
					continue
				}
			}
			newFrom = i
		}
		nd := &x.nodes[nodeOf(id)]
		if nd.flags&(flagCached|flagMark) != 0 {
			if marks {
				x.clearMarks(ids[newFrom:i])
			}
			return 0, &BlockError{Op: "commit", ID: id, Err: ErrAlreadyCached}
		}
		if marks {
			nd.flags |= flagMark
		}
	}
	if marks {
		x.clearMarks(ids[newFrom:])
	}
	return newFrom, nil
}

// insertChain caches ids[from:] as a chain under node at (whose key planCommit used), with
// keys from keyBuf, and reports them to the observer. It returns the last new node. held
// takes the index's references in this pass (commitHeld) rather than by Pool.Retain.
func (x *Index) insertChain(at int32, start int, p *Prompt, ids []blocks.ID, from int, t uint64, held bool) int32 {
	if !held {
		if err := x.pool.Retain(ids[from:]...); err != nil {
			panic("kvpage: broken invariant: retaining validated blocks failed: " + err.Error())
		}
	}
	refs := x.refs
	parent := at
	mmLo := 0
	var src [][16]int32 // with 16-token blocks, the prompt's blocks
	if x.bs == 16 {
		// As in planCommit: sound only because of commit's LengthError check, which
		// bounds (start+len(ids)) x bs by len(p.Tokens) (the slice expression bounds n*16
		// by the capacity alone); n >= 1, since from < len(ids).
		n := start + len(ids)
		src = unsafe.Slice((*[16]int32)(p.Tokens[:n*16]), n)
	}
	for i := from; i < len(ids); i++ {
		id := ids[i]
		if held {
			// Held by the caller, so not free; checkCommitted bounds it under kvinvariants.
			if refs[id] >= blocks.MaxRefCount {
				panic("kvpage: broken invariant: a trusted commit of a block with MaxRefCount holders")
			}
			refs[id]++
		}
		n := nodeOf(id)
		nd := &x.nodes[n]
		// Field by field, not a composite literal, which builds the 128-byte node aside and
		// copies it: a new gen makes a new incarnation (cursors at the evicted one stay stale).
		nd.key, nd.lastAccess, nd.parent = x.keyBuf[i], t, at
		nd.children, nd.pinnedKids, nd.hint = 0, 0, 0
		nd.gen = x.newGen()
		nd.hits = 1
		nd.flags, nd.prio = flagCached, 0
		b := start + i
		if len(p.RetentionRanges) == 0 { // the common case, without a call per block
			x.retain(n, p.Retention)
		} else {
			x.retain(n, p.retentionAt(b, x.bs, t))
		}
		if x.bs == 16 {
			// Through a local, so that the compiler knows source and destination do not
			// overlap and writes the 64-byte move out in line: no memmove call per block.
			blk := src[b]
			nd.tok = blk
		} else {
			copy(x.blockTokens(n), p.Tokens[b*x.bs:(b+1)*x.bs])
		}
		if len(p.MM) > 0 {
			if mm := x.blockMM(p, b, &mmLo); mm != nil {
				x.mm[n] = append([]mmKey(nil), mm...)
				nd.flags |= flagMM
			}
		}
		if x.ctl.quota != nil {
			x.quotaInserted(n, at)
		}
		x.cached++
		pn := &x.nodes[at]
		if pn.children == 0 && pn.flags&flagPinned == 0 && x.isBlock(at) {
			x.evRemoveSlow(at) // an unpinned leaf until now: in the eviction set
		}
		pn.children++
		if nd.flags&flagMM == 0 && x.nodes[at].hint == 0 {
			// A new child takes the hint only from nobody, and the hint child is the one
			// child the table does not hold (see Index.nodes): a chain of new blocks, each
			// the first child of the last, costs no table line at all.
			x.nodes[at].hint = n
		} else {
			x.table.insert(n, nd.key)
		}
		// The caller holds it: pinned. Under a pinned block (the common case: the
		// previous block of the chain, or the hit's tail) that is all pin would do.
		if pn.flags&flagPinned != 0 {
			nd.flags |= flagPinned
			x.pinned++
			pn.pinnedKids++
		} else {
			x.pin(n)
		}
		at = n
	}
	if x.hashes != nil {
		x.hashChain(parent, start+from, p, ids[from:])
	}
	if x.obs != nil {
		x.emitStored(parent, start+from, p, ids[from:])
	}
	if x.tiers != nil {
		x.tierCommitted(ids[from:])
	}
	return at
}

// retain gives block node n retention r. The caller puts n's entry in the eviction set
// afterwards if n is there (touch does).
func (x *Index) retain(n int32, r Retention) {
	x.nodes[n].prio = r.Priority
	if x.until != nil {
		x.until[n] = r.Until
	}
}

// touch sets node n's last access to t, keeping its place in the eviction set right.
func (x *Index) touch(n int32, t uint64) {
	x.nodes[n].lastAccess = t
	if evictable(&x.nodes[n]) {
		x.evAdd(n) // re-ranks it
	}
}
