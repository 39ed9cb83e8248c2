package hybrid_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/kvpage/kvpage/bench"
)

// This file is a reference model of vLLM v1's hybrid KV-cache manager (upstream commit
// ff1b90a2: kv_cache_coordinator.py, single_type_kv_cache_manager.py, block_pool.py and
// kv_cache_utils.py), written to be obviously right rather than fast: one pool of blocks
// with one global free queue (a doubly linked list in eviction order), a hash-to-blocks map
// keyed by (block hash, group) that may hold several blocks under one key, and one manager
// per group (full attention, sliding window). Tests drive it with W4 and with vLLM's own
// scenarios, and compare the production code against it.

// vmNull is the null block's ID (vLLM pops block 0 off the free queue for it).
const vmNull = 0

// vmHash is a chained block hash: sha256 over the parent hash and the block's tokens, so
// two blocks have the same hash exactly when their whole prefixes are equal.
type vmHash [sha256.Size]byte

// vmKey is vLLM's BlockHashWithGroupId.
type vmKey struct {
	h     vmHash
	group int
}

type vmBlock struct {
	ref     int
	hashed  bool // block.block_hash is not None
	key     vmKey
	prev    int // free-queue links; -1 at the ends
	next    int
	inQueue bool
}

// vmPool is vLLM's BlockPool with FreeKVCacheBlockQueue.
type vmPool struct {
	blocks     []vmBlock
	head, tail int // free queue ends, -1 when empty
	free       int // blocks in the free queue
	// cached maps a key to its blocks in insertion order (vLLM's BlockHashToBlockMap: one
	// block, or a dict keeping insertion order); lookups return the first.
	cached map[vmKey][]int

	evictions  int
	duplicates [8]int // per group: inserts under a key that already had a block
}

func newVMPool(n int) *vmPool {
	p := &vmPool{blocks: make([]vmBlock, n), head: -1, tail: -1, cached: map[vmKey][]int{}}
	for i := range p.blocks {
		p.blocks[i].prev, p.blocks[i].next = -1, -1
		p.append(i)
	}
	if got := p.popFront(); got != vmNull {
		panic("null block is not block 0")
	}
	return p
}

func (p *vmPool) append(b int) {
	blk := &p.blocks[b]
	if blk.inQueue {
		panic(fmt.Sprintf("block %d appended twice", b))
	}
	blk.prev, blk.next, blk.inQueue = p.tail, -1, true
	if p.tail >= 0 {
		p.blocks[p.tail].next = b
	} else {
		p.head = b
	}
	p.tail = b
	p.free++
}

func (p *vmPool) remove(b int) {
	blk := &p.blocks[b]
	if !blk.inQueue {
		panic(fmt.Sprintf("block %d not in the free queue", b))
	}
	if blk.prev >= 0 {
		p.blocks[blk.prev].next = blk.next
	} else {
		p.head = blk.next
	}
	if blk.next >= 0 {
		p.blocks[blk.next].prev = blk.prev
	} else {
		p.tail = blk.prev
	}
	blk.prev, blk.next, blk.inQueue = -1, -1, false
	p.free--
}

func (p *vmPool) popFront() int {
	b := p.head
	if b < 0 {
		panic("free queue empty")
	}
	p.remove(b)
	return b
}

// getCached is get_cached_block for one group: the first block under (h, group), or -1.
func (p *vmPool) getCached(h vmHash, group int) int {
	if bs := p.cached[vmKey{h, group}]; len(bs) > 0 {
		return bs[0]
	}
	return -1
}

// getNewBlocks is get_new_blocks: pop n blocks off the front of the free queue, evicting
// each one that is cached.
func (p *vmPool) getNewBlocks(n int) []int {
	if n > p.free {
		panic(fmt.Sprintf("cannot get %d free blocks of %d", n, p.free))
	}
	out := make([]int, n)
	for i := range out {
		b := p.popFront()
		p.maybeEvict(b)
		if p.blocks[b].ref != 0 {
			panic("popped a referenced block")
		}
		p.blocks[b].ref++
		out[i] = b
	}
	return out
}

// maybeEvict is _maybe_evict_cached_block; it counts the evictions W4 reports.
func (p *vmPool) maybeEvict(b int) bool {
	blk := &p.blocks[b]
	if !blk.hashed {
		return false
	}
	bs := p.cached[blk.key]
	at := -1
	for i, x := range bs {
		if x == b {
			at = i
		}
	}
	if at < 0 {
		return false
	}
	bs = append(bs[:at:at], bs[at+1:]...)
	if len(bs) == 0 {
		delete(p.cached, blk.key)
	} else {
		p.cached[blk.key] = bs
	}
	blk.hashed, blk.key = false, vmKey{}
	p.evictions++
	return true
}

// touch takes a reference on each hit block, taking it off the free queue if it was there.
func (p *vmPool) touch(bs []int) {
	for _, b := range bs {
		if p.blocks[b].ref == 0 && b != vmNull {
			p.remove(b)
		}
		p.blocks[b].ref++
	}
}

// freeBlocks drops one reference on each block and appends those left unreferenced to the
// free queue in the order given (the first is evicted first).
func (p *vmPool) freeBlocks(bs []int) {
	for _, b := range bs {
		p.blocks[b].ref--
	}
	for _, b := range bs {
		if b != vmNull && p.blocks[b].ref == 0 {
			p.append(b)
		}
	}
}

// cacheFullBlocks is cache_full_blocks: blocks[numCached:numFull] get their hashes and
// enter the map, null blocks skipped.
func (p *vmPool) cacheFullBlocks(blocks []int, hashes []vmHash, numCached, numFull, group int, mask []bool) {
	for i := numCached; i < numFull; i++ {
		b := blocks[i]
		if b == vmNull || mask != nil && !mask[i-numCached] {
			continue
		}
		blk := &p.blocks[b]
		if blk.hashed {
			panic(fmt.Sprintf("block %d cached twice", b))
		}
		k := vmKey{hashes[i], group}
		if len(p.cached[k]) > 0 {
			p.duplicates[group]++
		}
		blk.hashed, blk.key = true, k
		p.cached[k] = append(p.cached[k], b)
	}
}

// vmGroup is one KV-cache group's spec as the model needs it: window 0 is full attention,
// window > 0 a sliding window of that many tokens; mamba a Mamba state (vLLM's default
// mode); chunk > 0 chunked local attention with chunks of that many tokens.
type vmGroup struct {
	blockSize int
	window    int
	mamba     bool
	chunk     int
	align     bool // a Mamba group in vLLM's mamba_cache_mode "align" (vmalign_test.go)
}

func (g vmGroup) full() bool { return g.window == 0 && !g.mamba && g.chunk == 0 }

func (g vmGroup) skippedTokens(computed int) int {
	switch {
	case g.mamba:
		return max(0, computed-1)
	case g.chunk > 0:
		return computed / g.chunk * g.chunk
	case g.window == 0:
		return 0
	}
	return max(0, computed-g.window+1)
}

// vmRequest is what the managers track for one request (req_to_blocks, num_cached_block).
type vmRequest struct {
	seed      vmHash // parent hash of block 0: the cache salt's, or zero
	tokens    []int32
	hashes    []vmHash // one per full block of tokens (hash_block_size = block size)
	computed  int      // num_computed_tokens
	blocks    [][]int  // per group
	numCached []int    // per group; -1 while the request is not yet running in the group
	lastState []int    // per align group: last_state_block_idx, -1 when unset
	numPrompt int      // num_prompt_tokens, for the replay boundary of sparse retention
}

// vmManager is the KVCacheManager over a HybridKVCacheCoordinator (or a unitary one for a
// single group): enough of it to run W4 and vLLM's tests.
type vmManager struct {
	pool   *vmPool
	groups []vmGroup
	bs     int // hash block size: every group's block size here
	eagle  bool
	// retention is prefix_cache_retention_interval; nil is vLLM's None (dense).
	retention *int
	// checkFirst makes a failed allocate_slots change nothing: the pool check counts the
	// blocks remove_skipped_blocks would free instead of freeing them first. This is the
	// Manager's one deliberate difference from vLLM, and only on failure.
	checkFirst bool
}

func newVMManager(numBlocks int, groups []vmGroup, eagle bool) *vmManager {
	for _, g := range groups {
		if g.blockSize != groups[0].blockSize {
			panic("the model keeps one block size")
		}
	}
	return &vmManager{pool: newVMPool(numBlocks), groups: groups, bs: groups[0].blockSize, eagle: eagle}
}

func (m *vmManager) newRequest(prompt []int32) *vmRequest { return m.newRequestIn("", prompt) }

// newRequestIn makes a request with a cache salt: vLLM hashes it into the first block,
// so no block of another salt ever matches.
func (m *vmManager) newRequestIn(salt string, prompt []int32) *vmRequest {
	r := &vmRequest{blocks: make([][]int, len(m.groups)), numCached: make([]int, len(m.groups)), lastState: make([]int, len(m.groups))}
	if salt != "" {
		r.seed = sha256.Sum256([]byte(salt))
	}
	for g := range r.numCached {
		r.numCached[g], r.lastState[g] = -1, -1
	}
	m.appendTokens(r, prompt)
	r.numPrompt = len(prompt)
	return r
}

// appendTokens adds tokens and the hashes of the blocks they fill (update_block_hashes).
func (m *vmManager) appendTokens(r *vmRequest, toks []int32) {
	r.tokens = append(r.tokens, toks...)
	for (len(r.hashes)+1)*m.bs <= len(r.tokens) {
		i := len(r.hashes)
		parent := r.seed
		if i > 0 {
			parent = r.hashes[i-1]
		}
		h := sha256.New()
		h.Write(parent[:])
		var buf [4]byte
		for _, t := range r.tokens[i*m.bs : (i+1)*m.bs] {
			binary.LittleEndian.PutUint32(buf[:], uint32(t))
			h.Write(buf[:])
		}
		var out vmHash
		h.Sum(out[:0])
		r.hashes = append(r.hashes, out)
	}
}

// computedBlocks is get_computed_blocks: the hit blocks per group and the hit tokens, by
// the coordinator's fixed point (full attention first and once; the simple hybrid of one
// full-attention kind and one other stops after one round). Groups with equal specs are
// looked up together, as vLLM does (a hit needs every one of them).
func (m *vmManager) computedBlocks(r *vmRequest) ([][]int, int) {
	maxLen := len(r.tokens) - 1
	hits := make([][]int, len(m.groups))
	if len(m.groups) == 1 {
		hits[0] = m.findKind([]int{0}, r.hashes, maxLen)[0]
		return hits, len(hits[0]) * m.bs
	}
	// Kinds: lists of group IDs with equal specs, full attention first.
	var kinds [][]int
	for _, full := range []bool{true, false} {
		for g, spec := range m.groups {
			if spec.full() != full {
				continue
			}
			placed := false
			for k := range kinds {
				if m.groups[kinds[k][0]] == spec {
					kinds[k] = append(kinds[k], g)
					placed = true
				}
			}
			if !placed {
				kinds = append(kinds, []int{g})
			}
		}
	}
	if len(kinds) == 1 {
		// Equal specs in several groups: vLLM's hybrid coordinator refuses this (it needs
		// two kinds); the Manager looks them up once, as the unitary coordinator would.
		found := m.findKind(kinds[0], r.hashes, maxLen)
		for i, g := range kinds[0] {
			hits[g] = found[i]
		}
		return hits, len(found[0]) * m.bs
	}
	simple := len(kinds) == 2 && m.groups[kinds[0][0]].full()
	hit := maxLen
	done := make([]bool, len(m.groups))
	for {
		cur := hit
		for _, kind := range kinds {
			g0 := kind[0]
			if m.groups[g0].full() && done[g0] {
				cur = cur / m.bs * m.bs
				continue
			}
			found := m.findKind(kind, r.hashes, cur)
			for i, g := range kind {
				hits[g], done[g] = found[i], true
			}
			cur = len(found[0]) * m.bs
		}
		if cur >= hit {
			break
		}
		hit = cur
		if simple {
			break
		}
	}
	if m.groups[kinds[0][0]].full() {
		for _, g := range kinds[0] {
			hits[g] = hits[g][:min(len(hits[g]), hit/m.bs)]
		}
	}
	return hits, hit
}

// findKind is find_longest_cache_hit of one kind of groups with equal specs, looked up
// together as vLLM does: a block is a hit only if every group of the kind has it
// (get_cached_block with several group IDs). Full attention scans left to right; a
// sliding window scans right to left for the blocks the window needs before the hit's end,
// and a run that starts at block 0 is a hit even if shorter. EAGLE drops the last block
// (a sliding window needs one more block for that). Alignment is the block size.
func (m *vmManager) findKind(kind []int, hashes []vmHash, maxLen int) [][]int {
	has := func(i int) []int {
		var bs []int
		for _, g := range kind {
			b := m.pool.getCached(hashes[i], g)
			if b < 0 {
				return nil
			}
			bs = append(bs, b)
		}
		return bs
	}
	out := make([][]int, len(kind))
	n := min(maxLen/m.bs, len(hashes))
	spec := m.groups[kind[0]]
	if spec.mamba {
		// MambaManager: the rightmost cached block, nulls before it; no EAGLE drop.
		for i := n - 1; i >= 0; i-- {
			if bs := has(i); bs != nil {
				for k := range kind {
					out[k] = make([]int, i+1)
					out[k][i] = bs[k]
				}
				break
			}
		}
		return out
	}
	if spec.chunk > 0 {
		// ChunkedLocalAttentionManager: nulls before the chunk the longest hit ends in.
		start := 0
		if maxLen > 0 {
			start = maxLen / spec.chunk * spec.chunk / m.bs
		}
		for k := range kind {
			out[k] = make([]int, start)
		}
		for i := start; i < n; i++ {
			bs := has(i)
			if bs == nil {
				break
			}
			for k := range kind {
				out[k] = append(out[k], bs[k])
			}
		}
		return out
	}
	if spec.window == 0 {
		for i := 0; i < n; i++ {
			bs := has(i)
			if bs == nil {
				break
			}
			for k := range kind {
				out[k] = append(out[k], bs[k])
			}
		}
	} else {
		need := (spec.window - 1 + m.bs - 1) / m.bs
		if m.eagle {
			need++
		}
		for k := range kind {
			out[k] = make([]int, n) // vmNull everywhere
		}
		run, found := 0, false
		for i := n - 1; i >= 0; i-- {
			bs := has(i)
			if bs == nil {
				run = 0
				continue
			}
			for k := range kind {
				out[k][i] = bs[k]
			}
			if run++; run >= need {
				for k := range kind {
					out[k] = out[k][:i+run]
				}
				found = true
				break
			}
		}
		if !found {
			for k := range kind {
				out[k] = out[k][:run]
			}
		}
	}
	if m.eagle && len(out[0]) > 0 {
		for k := range kind {
			out[k] = out[k][:len(out[k])-1]
		}
	}
	return out
}

// allocateSlots is allocate_slots(request, numNew, numNewComputed, hit); it returns false
// (changing nothing but the skipped-block frees, as vLLM) when the pool is short.
func (m *vmManager) allocateSlots(r *vmRequest, numNew, numNewComputed int, hit [][]int) bool {
	return m.allocateSlotsAhead(r, numNew, numNewComputed, hit, 0)
}

// allocateSlotsAhead is allocate_slots with num_lookahead_tokens: slots for lookahead
// more tokens, cached only up to the new tokens. A running request whose next write lands
// in a block a fork shares gets its private copy first, group by group (vmfork_test.go;
// vLLM has no forks).
func (m *vmManager) allocateSlotsAhead(r *vmRequest, numNew, numNewComputed int, hit [][]int, lookahead int) bool {
	local := r.computed + numNewComputed
	need := local + numNew + lookahead
	freed := 0
	if m.checkFirst {
		for g := range m.groups {
			freed += m.wouldFree(r, g, local)
		}
	} else {
		// remove_skipped_blocks, before anything is allocated.
		for g := range m.groups {
			m.removeSkipped(r, g, local)
		}
	}
	toAlloc := 0
	for g, spec := range m.groups {
		var newComputed []int
		if hit != nil {
			newComputed = hit[g]
		}
		required := (need + m.bs - 1) / m.bs
		have := len(r.blocks[g])
		if spec.align {
			toAlloc += m.alignNeed(r, g, local+numNew, newComputed)
			if _, ok := m.sharedWrite(r, g, local); ok && need > local {
				toAlloc++
			}
			continue
		}
		if r.numCached[g] >= 0 {
			toAlloc += max(required-have, 0)
			if _, ok := m.sharedWrite(r, g, local); ok && need > local {
				toAlloc++
			}
			continue
		}
		skippedBlocks := spec.skippedTokens(local) / m.bs
		localBlocks := len(newComputed) + have
		toAlloc += max(required-max(skippedBlocks, localBlocks), 0)
		skipNew := max(0, skippedBlocks-have)
		for _, b := range newComputed[min(skipNew, len(newComputed)):] {
			if b != vmNull && m.pool.blocks[b].ref == 0 {
				toAlloc++
			}
		}
	}
	if toAlloc > m.pool.free+freed {
		return false
	}
	if m.checkFirst {
		for g := range m.groups {
			m.removeSkipped(r, g, local)
		}
	}
	for g, spec := range m.groups {
		if r.numCached[g] >= 0 {
			continue
		}
		var newComputed []int
		if hit != nil {
			newComputed = hit[g]
		}
		skipped := spec.skippedTokens(local) / m.bs
		if skipped > 0 {
			newComputed = newComputed[min(skipped, len(newComputed)):]
		}
		m.pool.touch(newComputed)
		for range skipped {
			r.blocks[g] = append(r.blocks[g], vmNull)
		}
		r.blocks[g] = append(r.blocks[g], newComputed...)
		r.numCached[g] = len(r.blocks[g])
	}
	for g := range m.groups {
		if i, ok := m.sharedWrite(r, g, local); ok && need > local {
			src := r.blocks[g][i]
			r.blocks[g][i] = m.pool.getNewBlocks(1)[0]
			m.pool.blocks[src].ref--
		}
		if m.groups[g].align {
			m.alignAllocate(r, g, local+numNew)
			continue
		}
		required := (need + m.bs - 1) / m.bs
		if n := required - len(r.blocks[g]); n > 0 {
			r.blocks[g] = append(r.blocks[g], m.pool.getNewBlocks(n)...)
		}
	}
	toCache := min(local+numNew, len(r.tokens))
	for g := range m.groups {
		full := toCache / m.bs
		if r.numCached[g] >= full {
			continue
		}
		m.pool.cacheFullBlocks(r.blocks[g], r.hashes, r.numCached[g], full, g, m.reachableMask(r, g, r.numCached[g], full))
		r.numCached[g] = full
	}
	return true
}

// removeSkipped frees a group's blocks wholly outside the window, last first, and puts
// the null block in their place.
func (m *vmManager) removeSkipped(r *vmRequest, g, computed int) {
	skipped := m.groups[g].skippedTokens(computed)
	if skipped <= 0 {
		return
	}
	bl := r.blocks[g]
	n := min(skipped/m.bs, len(bl))
	var removed []int
	for i := n - 1; i >= 0; i-- {
		if bl[i] == vmNull {
			break
		}
		removed = append(removed, bl[i])
		bl[i] = vmNull
	}
	m.pool.freeBlocks(removed)
	if m.groups[g].align {
		m.alignRemoveLastState(r, g, computed)
	}
}

// wouldFree counts the blocks removeSkipped would return to the free queue.
func (m *vmManager) wouldFree(r *vmRequest, g, computed int) int {
	skipped := m.groups[g].skippedTokens(computed)
	if skipped <= 0 {
		return 0
	}
	bl := r.blocks[g]
	n := 0
	lo := min(skipped/m.bs, len(bl))
	for i := lo - 1; i >= 0 && bl[i] != vmNull; i-- {
		if m.pool.blocks[bl[i]].ref == 1 {
			n++
		}
		lo = i
	}
	if m.groups[g].align {
		if i := r.lastState[g]; i >= 0 && i < (computed+m.bs-1)/m.bs-1 && bl[i] != vmNull &&
			(i < lo || i >= min(skipped/m.bs, len(bl))) && m.pool.blocks[bl[i]].ref == 1 {
			n++
		}
	}
	return n
}

// free releases every group's blocks, group by group, each in reverse order.
func (m *vmManager) free(r *vmRequest) {
	for g := range m.groups {
		bl := r.blocks[g]
		rev := make([]int, len(bl))
		for i, b := range bl {
			rev[len(bl)-1-i] = b
		}
		m.pool.freeBlocks(rev)
		r.blocks[g], r.numCached[g] = nil, -1
	}
}

// vmW4Result is what the model reports for W4.
type vmW4Result struct {
	HitTokens  uint64
	Evictions  int
	FirstHits  []int
	Duplicates []int
}

// runW4Model drives the model with W4 exactly as workloads.md says vLLM was driven.
func runW4Model(tr *bench.W3Trace) vmW4Result {
	m := newVMManager(bench.W3PoolBlocks, []vmGroup{{blockSize: bench.BlockSize}, {blockSize: bench.BlockSize, window: bench.W4Window}}, false)
	var res vmW4Result
	for i := range tr.Requests {
		rq := &tr.Requests[i]
		r := m.newRequest(rq.Prompt)
		hit, n := m.computedBlocks(r)
		res.HitTokens += uint64(n)
		if len(res.FirstHits) < 8 {
			res.FirstHits = append(res.FirstHits, n)
		}
		if !m.allocateSlots(r, len(rq.Prompt)-n, n, hit) {
			panic("W4 prompt does not fit")
		}
		r.computed = len(rq.Prompt)
		for j := range rq.Output {
			m.appendTokens(r, rq.Output[j:j+1])
			if !m.allocateSlots(r, 1, 0, nil) {
				panic("W4 decode does not fit")
			}
			r.computed++
		}
		m.free(r)
	}
	res.Evictions = m.pool.evictions
	res.Duplicates = m.pool.duplicates[:len(m.groups)]
	return res
}
