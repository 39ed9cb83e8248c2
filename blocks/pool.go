package blocks

import (
	"fmt"
	"slices"

	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/internal/poolrefs"
)

// Pool is a fixed-capacity set of physical KV blocks with reference counts and a FIFO free
// list. The zero value is not usable; call New.
//
// Metadata lives in two flat slices, a refcount and a free-ring slot per block: 8 bytes a
// block and no pointer per block, so a pool of a million blocks costs 8 MiB and nothing
// for the garbage collector to scan.
type Pool struct {
	refs      []int32 // holders per block; 0 = free
	ring      []ID    // free IDs, FIFO: head is handed out next, releases go to the tail
	head      int
	nfree     int
	hasNull   bool
	reclaimer Reclaimer
	handoff   poolrefs.Handoff[ID] // the reclaimer, when it hands evicted blocks over (allocateHandoff)
	faults    *Faults              // fault injection for tests (fault.go); nil in production

	allocs, releases, failed, reclaimed uint64
	mutations                           uint64
}

// New returns a pool of numBlocks physical blocks. With WithNullBlock, block 0 is reserved
// and numBlocks-1 are usable. A new pool hands out IDs in ascending order and reuses
// released blocks in the order they were released, so tests can assert exact IDs. The
// error wraps ErrInvalidArgument when no block would be usable (numBlocks <= 0, or 1 with
// the null block) or when numBlocks does not fit an int32 ID.
func New(numBlocks int, opts ...Option) (*Pool, error) {
	p := &Pool{}
	for _, o := range opts {
		if o != nil {
			o(p)
		}
	}
	first := 0
	if p.hasNull {
		first = 1
	}
	if numBlocks-first <= 0 {
		return nil, fmt.Errorf("%w: pool of %d blocks has no usable block", ErrInvalidArgument, numBlocks)
	}
	if numBlocks > 1<<31-1 {
		return nil, fmt.Errorf("%w: %d blocks do not fit an int32 ID", ErrInvalidArgument, numBlocks)
	}
	p.refs = make([]int32, numBlocks)
	p.ring = make([]ID, numBlocks-first)
	for i := range p.ring {
		p.ring[i] = ID(first + i)
	}
	p.nfree = len(p.ring)
	return p, nil
}

// SetReclaimer plugs in the Reclaimer, or with nil removes it. A pool has at most one: the
// prefix index sets itself when it is built over the pool, and a second index (or any other
// cache) over the same pool would silently take its place and strand the first one's
// blocks, so setting a Reclaimer while one is set fails with ErrReclaimerSet and changes
// nothing.
func (p *Pool) SetReclaimer(r Reclaimer) error {
	if r != nil && p.reclaimer != nil {
		return ErrReclaimerSet
	}
	p.reclaimer = r
	p.handoff, _ = r.(poolrefs.Handoff[ID])
	return nil
}

// NumBlocks is the number of physical blocks, the null block included.
func (p *Pool) NumBlocks() int { return len(p.refs) }

// Capacity is the number of usable blocks.
func (p *Pool) Capacity() int { return len(p.ring) }

// HasNullBlock reports whether block 0 is reserved as the null block.
func (p *Pool) HasNullBlock() bool { return p.hasNull }

// NumFree is the number of blocks on the free list.
func (p *Pool) NumFree() int {
	if p.faults != nil {
		return p.faultyNumFree()
	}
	return p.nfree
}

// Available is how many blocks an allocation can have now: free plus reclaimable.
func (p *Pool) Available() int {
	if p.faults != nil {
		return p.faultyAvailable()
	}
	if p.reclaimer == nil {
		return p.nfree
	}
	return p.nfree + p.reclaimer.Reclaimable()
}

// RefCount returns the number of holders of id (0 for a free block, the null block or an
// unknown ID).
func (p *Pool) RefCount(id ID) int {
	if id < 0 || int(id) >= len(p.refs) {
		return 0
	}
	return int(p.refs[id])
}

// Allocate appends n newly allocated blocks, each with one holder, to dst and returns it.
// It is all or nothing: when free plus reclaimable blocks cannot cover n, it returns dst
// unchanged and an *OutOfBlocksError (wrapping ErrOutOfBlocks), having evicted nothing;
// only the FailedAllocations counter records the attempt. When the free list alone is
// short, the Reclaimer frees the difference first. Blocks come off the head of the free
// list: ascending IDs from a new pool, then released blocks in the order they were released.
// Allocate allocates no memory when dst has room for n more IDs.
func (p *Pool) Allocate(dst []ID, n int) ([]ID, error) {
	if p.faults != nil {
		return p.faultyAllocate(dst, n)
	}
	if n < 0 {
		return dst, &CountError{Op: "allocate", N: n}
	}
	if n > p.nfree {
		if p.handoff != nil {
			return p.allocateHandoff(dst, n)
		}
		if err := p.reclaim(n); err != nil {
			return dst, err
		}
	}
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	out := dst[start:]
	// The free blocks are ring[head : head+n], wrapped: at most two contiguous copies.
	first := copy(out, p.ring[p.head:min(p.head+n, len(p.ring))])
	copy(out[first:], p.ring)
	p.head += n
	if p.head >= len(p.ring) {
		p.head -= len(p.ring)
	}
	refs := p.refs
	for _, id := range out {
		refs[id] = 1
	}
	p.nfree -= n
	p.allocs += uint64(n)
	p.checkAfterMutation()
	return dst, nil
}

// allocateHandoff serves an allocation of n blocks when fewer are free: the whole free
// list, then n-nfree blocks evicted by the reclaimer straight into dst (poolrefs.Handoff),
// each passing its one reference from the cache to the allocation. The IDs, their order
// and every counter are those of reclaim followed by the free list's path (the victims
// would join the list's tail in eviction order and be taken next); only the victims'
// trip through the ring and through a count of 0 is skipped.
func (p *Pool) allocateHandoff(dst []ID, n int) ([]ID, error) {
	avail := p.Available()
	if avail < n {
		p.failed++
		return dst, &OutOfBlocksError{Requested: n, Available: avail}
	}
	before := p.nfree
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	out := dst[start:]
	if before > 0 { // else (a full pool's every allocation) there is nothing to take: no copy calls
		first := copy(out[:before], p.ring[p.head:min(p.head+before, len(p.ring))])
		copy(out[first:before], p.ring)
		p.head += before
		if p.head >= len(p.ring) {
			p.head -= len(p.ring)
		}
		p.nfree = 0
		refs := p.refs
		for _, id := range out[:before] {
			refs[id] = 1
		}
	}
	if got := p.handoff.ReclaimInto(out[before:]); got != n-before {
		panic(fmt.Sprintf("kvpage: broken invariant: reclaimer reported %d reclaimable blocks but evicted %d for an allocation of %d", avail-before, got, n))
	}
	k := uint64(n - before)
	p.allocs += uint64(n)
	p.releases += k
	p.reclaimed += k
	p.checkAfterMutation()
	return dst, nil
}

// allocateOne is poolrefs.AllocateOne: Allocate(dst, 1)'s block, counters and checks, or
// false with nothing changed where Allocate would fail or take a path it does not (fault
// injection; a Reclaimer that frees blocks instead of handing them over). A full pool's
// every decode step lands here, so it asks the reclaimer for its victim directly
// (ReclaimOne) rather than through Available, a slice and ReclaimInto: 1.9% of the
// simulator's instructions, with sharing and without (bench/README, twelfth session). It
// repeats Allocate's free-list step and allocateHandoff's counters for one block;
// TestAllocateOneMatchesAllocate keeps the three in lockstep.
func (p *Pool) allocateOne() (ID, bool) {
	if p.faults != nil {
		return 0, false
	}
	if p.nfree == 0 {
		if p.handoff == nil {
			return 0, false
		}
		id, ok := p.handoff.ReclaimOne()
		if !ok {
			return 0, false
		}
		p.allocs++
		p.releases++
		p.reclaimed++
		p.checkAfterMutation()
		return id, true
	}
	id := p.ring[p.head]
	p.head++
	if p.head == len(p.ring) {
		p.head = 0
	}
	p.refs[id] = 1
	p.nfree--
	p.allocs++
	p.checkAfterMutation()
	return id, true
}

// reclaim makes at least n blocks free by asking the Reclaimer for the shortfall, or returns
// an *OutOfBlocksError, having changed nothing but the FailedAllocations counter, when free
// plus reclaimable blocks cannot cover n.
func (p *Pool) reclaim(n int) error {
	avail := p.Available()
	if avail < n {
		p.failed++
		return &OutOfBlocksError{Requested: n, Available: avail}
	}
	before := p.nfree
	p.reclaimer.Reclaim(n - before)
	// Count what actually came back, not what the Reclaimer says it freed.
	if p.nfree > before {
		p.reclaimed += uint64(p.nfree - before)
	}
	if n > p.nfree {
		panic(fmt.Sprintf("kvpage: broken invariant: reclaimer reported %d reclaimable blocks but left %d free for an allocation of %d", avail-before, p.nfree, n))
	}
	return nil
}

// Retain adds one holder to each of ids (a fork, a prefix hit, the cache taking a block);
// an ID listed twice gains two holders. It is all or nothing: a free, null or unknown ID,
// or a block that already has MaxRefCount holders (ErrRefCountOverflow: the count would
// wrap), fails the whole call with a *BlockError and changes nothing.
func (p *Pool) Retain(ids ...ID) error {
	refs := p.refs
	for i, id := range ids {
		// One pass: a failure undoes the holders added so far, as Release does.
		if uint32(id) >= uint32(len(refs)) || refs[id] <= 0 || refs[id] == MaxRefCount || (p.hasNull && id == NullID) {
			for _, done := range ids[:i] {
				refs[done]--
			}
			return p.retainError(id)
		}
		refs[id]++
	}
	p.checkAfterMutation()
	return nil
}

// retainError explains why id cannot be retained (with the holders of earlier IDs of the
// call already undone).
func (p *Pool) retainError(id ID) error {
	if err := p.validate("retain", id); err != nil {
		return err
	}
	if p.refs[id] == 0 {
		return &BlockError{Op: "retain", ID: id, Err: ErrNotAllocated}
	}
	return &BlockError{Op: "retain", ID: id, Err: ErrRefCountOverflow}
}

// Release drops one holder from each of ids, in order; an ID listed twice loses two
// holders. A block whose last holder leaves goes to the tail of the free list at that
// point, so blocks are queued in the order their last holder left. It is all or nothing:
// releasing a block more times than it is held (a double free), or a null or unknown ID,
// fails the whole call with a *BlockError and changes nothing. Release allocates no memory.
func (p *Pool) Release(ids ...ID) error {
	refs, ring := p.refs, p.ring
	// Newly freed blocks are written just past the free window, which only ever holds
	// stale IDs of blocks in use; the window grows over them once the whole call has
	// succeeded, so a failed call needs only its refcounts restored.
	tail := p.head + p.nfree
	if tail >= len(ring) {
		tail -= len(ring)
	}
	freed := 0
	for i, id := range ids {
		if uint32(id) >= uint32(len(refs)) || refs[id] <= 0 {
			for _, done := range ids[:i] {
				refs[done]++
			}
			return p.releaseError(id)
		}
		r := refs[id] - 1
		refs[id] = r
		if r == 0 {
			ring[tail] = id
			tail++
			if tail == len(ring) {
				tail = 0
			}
			freed++
		}
	}
	p.nfree += freed
	p.releases += uint64(freed)
	p.checkAfterMutation()
	return nil
}

// releaseError explains why id cannot be released.
func (p *Pool) releaseError(id ID) error {
	if err := p.validate("release", id); err != nil {
		return err
	}
	return &BlockError{Op: "release", ID: id, Err: ErrDoubleFree}
}

func (p *Pool) validate(op string, id ID) error {
	if id < 0 || int(id) >= len(p.refs) {
		return &BlockError{Op: op, ID: id, Err: ErrUnknownBlock}
	}
	if p.hasNull && id == NullID {
		return &BlockError{Op: op, ID: id, Err: ErrNullBlock}
	}
	return nil
}

// Stats returns a snapshot of the pool's state and counters.
func (p *Pool) Stats() Stats {
	s := Stats{
		Capacity:          len(p.ring),
		Free:              p.nfree,
		InUse:             len(p.ring) - p.nfree,
		Allocations:       p.allocs,
		Releases:          p.releases,
		FailedAllocations: p.failed,
		Reclaimed:         p.reclaimed,
	}
	if p.reclaimer != nil {
		s.Reclaimable = p.reclaimer.Reclaimable()
	}
	return s
}

func (p *Pool) checkAfterMutation() {
	if !invariant.Enabled {
		return
	}
	p.mutations++
	if invariant.Sample(p.mutations) {
		invariant.Check(p.CheckInvariants)
	}
}
