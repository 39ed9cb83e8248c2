package blocks

import "fmt"

// Faults makes a pool fail on purpose, so that a scheduler can test its out-of-memory paths
// against the real pool (package blocktable/kvtest drives it). Install one with
// Pool.SetFaults; a pool without one pays a single nil check in Allocate, Available and
// NumFree.
//
// Faults change what the pool reports and hands out, never its structure: CheckInvariants,
// Stats and RefCount keep describing the real pool, and removing the Faults restores the
// real behaviour at once.
type Faults struct {
	// Hidden is how many blocks the pool pretends not to have, as if something outside
	// held them: NumFree reports that many fewer free blocks and Available that many fewer
	// available ones (never below zero), and Allocate fails with ErrOutOfBlocks rather than
	// use them. When fewer blocks than Hidden are free, the rest come out of the
	// reclaimable ones, so the pool behaves like a smaller pool with the same cache.
	Hidden int
	// FailIn, when positive, makes the FailIn-th allocation from now fail: every Allocate
	// of at least one block that succeeds counts one down, and once FailIn is 1, the next
	// request for blocks fails with ErrOutOfBlocks, changing nothing, and sets FailIn to 0.
	// A request for blocks is Allocate(dst, n > 0) or Available: callers such as
	// blocktable.Manager check Available before they allocate, so that a failure changes
	// nothing, and the failure must reach them at that check. 0 disarms it.
	FailIn int
	// Tripped counts the failures FailIn delivered.
	Tripped int
}

// SetFaults installs f (nil removes it). The pool reads f's fields at every call, so a test
// can change them between calls.
func (p *Pool) SetFaults(f *Faults) { p.faults = f }

// Faults returns the installed Faults, or nil.
func (p *Pool) Faults() *Faults { return p.faults }

// trip delivers the armed failure, if this is the request it was armed for.
func (f *Faults) trip() bool {
	if f.FailIn != 1 {
		return false
	}
	f.FailIn = 0
	f.Tripped++
	return true
}

// faultyNumFree is NumFree less the hidden blocks.
func (p *Pool) faultyNumFree() int { return max(0, p.nfree-p.faults.Hidden) }

// faultyAvailable is Available less the hidden blocks, or 0 when the armed failure trips.
func (p *Pool) faultyAvailable() int {
	if p.faults.trip() {
		return 0
	}
	return p.availableHiding(p.faults.Hidden)
}

func (p *Pool) availableHiding(hidden int) int {
	avail := p.nfree - hidden
	if p.reclaimer != nil {
		avail += p.reclaimer.Reclaimable()
	}
	return max(0, avail)
}

// faultyAllocate is Allocate under Faults: the same all-or-nothing contract, with the
// hidden blocks kept back and the armed failure delivered.
func (p *Pool) faultyAllocate(dst []ID, n int) ([]ID, error) {
	f := p.faults
	if n > 0 {
		if f.trip() {
			p.failed++
			return dst, &OutOfBlocksError{Requested: n, Available: 0}
		}
		if avail := p.availableHiding(f.Hidden); avail < n {
			p.failed++
			return dst, &OutOfBlocksError{Requested: n, Available: avail}
		}
		// Keep Hidden blocks on the free list: reclaim whatever n needs beyond the rest.
		if short := n + f.Hidden - p.nfree; short > 0 {
			before := p.nfree
			p.reclaimer.Reclaim(short)
			p.reclaimed += uint64(p.nfree - before)
			if p.nfree < n {
				panic(fmt.Sprintf("kvpage: broken invariant: reclaimer left %d free blocks for an allocation of %d", p.nfree, n))
			}
		}
	}
	// The real pool can now serve n from its free list: run the normal path.
	p.faults = nil
	dst, err := p.Allocate(dst, n)
	p.faults = f
	if err == nil && n > 0 && f.FailIn > 1 {
		f.FailIn--
	}
	return dst, err
}
