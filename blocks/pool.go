package blocks

import (
	"fmt"

	"github.com/kvpage/kvpage/internal/invariant"
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

	allocs, releases, failed, reclaimed uint64
	mutations                           uint64
}

// New returns a pool of numBlocks physical blocks. With WithNullBlock, block 0 is reserved
// and numBlocks-1 are usable. A new pool hands out IDs in ascending order and reuses
// released blocks in the order they were released, so tests can assert exact IDs.
func New(numBlocks int, opts ...Option) (*Pool, error) {
	p := &Pool{}
	for _, o := range opts {
		o(p)
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

// SetReclaimer plugs in (or, with nil, removes) the Reclaimer. The prefix index calls it
// when it is built over the pool.
func (p *Pool) SetReclaimer(r Reclaimer) { p.reclaimer = r }

// NumBlocks is the number of physical blocks, the null block included.
func (p *Pool) NumBlocks() int { return len(p.refs) }

// Capacity is the number of usable blocks.
func (p *Pool) Capacity() int { return len(p.ring) }

// HasNullBlock reports whether block 0 is reserved as the null block.
func (p *Pool) HasNullBlock() bool { return p.hasNull }

// NumFree is the number of blocks on the free list.
func (p *Pool) NumFree() int { return p.nfree }

// Available is how many blocks an allocation can have now: free plus reclaimable.
func (p *Pool) Available() int {
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
// unchanged and an *OutOfBlocksError (wrapping ErrOutOfBlocks), having evicted nothing.
// When the free list alone is short, the Reclaimer frees the difference first.
// Allocate allocates no memory when dst has room for n more IDs.
func (p *Pool) Allocate(dst []ID, n int) ([]ID, error) {
	if n < 0 {
		return dst, fmt.Errorf("%w: allocate %d blocks", ErrInvalidArgument, n)
	}
	if n > p.nfree {
		avail := p.Available()
		if avail < n {
			p.failed++
			return dst, &OutOfBlocksError{Requested: n, Available: avail}
		}
		got := p.reclaimer.Reclaim(n - p.nfree)
		p.reclaimed += uint64(got)
		if n > p.nfree {
			panic(fmt.Sprintf("kvpage: broken invariant: reclaimer reported %d reclaimable blocks but left %d free for an allocation of %d", avail-p.nfree, p.nfree, n))
		}
	}
	for range n {
		id := p.ring[p.head]
		p.head++
		if p.head == len(p.ring) {
			p.head = 0
		}
		p.refs[id] = 1
		dst = append(dst, id)
	}
	p.nfree -= n
	p.allocs += uint64(n)
	p.checkAfterMutation()
	return dst, nil
}

// Retain adds one holder to each of ids (a fork, a prefix hit, the cache taking a block).
// It is all or nothing: a free, null or unknown ID fails the whole call with a *BlockError
// and changes nothing.
func (p *Pool) Retain(ids ...ID) error {
	for _, id := range ids {
		if err := p.validate("retain", id); err != nil {
			return err
		}
		if p.refs[id] == 0 {
			return &BlockError{Op: "retain", ID: id, Err: ErrNotAllocated}
		}
	}
	for _, id := range ids {
		p.refs[id]++
	}
	p.checkAfterMutation()
	return nil
}

// Release drops one holder from each of ids; a block whose last holder leaves goes to the
// tail of the free list, in the order of ids. It is all or nothing: releasing a block more
// times than it is held fails the whole call with a *BlockError wrapping ErrDoubleFree and
// changes nothing. Release allocates no memory.
func (p *Pool) Release(ids ...ID) error {
	for i, id := range ids {
		err := p.validate("release", id)
		if err == nil && p.refs[id] == 0 {
			err = &BlockError{Op: "release", ID: id, Err: ErrDoubleFree}
		}
		if err != nil {
			for _, done := range ids[:i] {
				p.refs[done]++
			}
			return err
		}
		p.refs[id]--
	}
	// Second pass: queue each block whose count reached zero exactly once, in order. A
	// block queued here is marked -1 so that a duplicate later in ids is not queued twice.
	for _, id := range ids {
		if p.refs[id] == 0 {
			p.push(id)
			p.refs[id] = -1
		}
	}
	for _, id := range ids {
		if p.refs[id] == -1 {
			p.refs[id] = 0
		}
	}
	p.checkAfterMutation()
	return nil
}

func (p *Pool) push(id ID) {
	tail := p.head + p.nfree
	if tail >= len(p.ring) {
		tail -= len(p.ring)
	}
	p.ring[tail] = id
	p.nfree++
	p.releases++
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
