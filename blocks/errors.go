package blocks

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvpage/kvpage/internal/argerr"
)

// Sentinel errors. Every error the pool returns for bad input wraps one of these, so callers
// test with errors.Is; a failed call leaves the pool exactly as it was.
var (
	// ErrOutOfBlocks: an allocation asked for more blocks than are free plus reclaimable.
	ErrOutOfBlocks = errors.New("blocks: out of blocks")
	// ErrDoubleFree: a block was released more times than it was held.
	ErrDoubleFree = errors.New("blocks: double free")
	// ErrNotAllocated: a free block was retained.
	ErrNotAllocated = errors.New("blocks: block is not allocated")
	// ErrUnknownBlock: an ID outside the pool.
	ErrUnknownBlock = errors.New("blocks: unknown block")
	// ErrNullBlock: the reserved null block was retained or released.
	ErrNullBlock = errors.New("blocks: the null block is reserved")
	// ErrInvalidArgument: a negative count, a non-positive capacity or a bad size. It
	// matches (errors.Is) the invalid-argument sentinel of every other package of the
	// module (prefix, blocktable, evict, sizing, ...), and they match it: one test covers
	// them all, and the message still says which package refused.
	ErrInvalidArgument = argerr.New("blocks: invalid argument")
	// ErrRefCountOverflow: a block already has MaxRefCount holders; one more would wrap
	// its count.
	ErrRefCountOverflow = errors.New("blocks: reference count overflow")
	// ErrReclaimerSet: the pool already has a Reclaimer (see Pool.SetReclaimer).
	ErrReclaimerSet = errors.New("blocks: the pool already has a reclaimer")
)

// MaxRefCount is the most holders one block can have (refcounts are int32): Retain refuses
// one more with ErrRefCountOverflow rather than wrap the count.
const MaxRefCount = 1<<31 - 1

// OutOfBlocksError says how many blocks an operation asked for and how many could be had
// (free plus reclaimable). It wraps ErrOutOfBlocks. The pool returns it for an allocation;
// blocktable returns it, wrapped in a *blocktable.SeqError naming the operation and the
// sequence, for an admission, an append, a fork, a preemption or a swap that ran short.
type OutOfBlocksError struct {
	// Requested is the number of blocks asked for (on admission, plus the watermark).
	Requested int
	// Available is how many could be had: free plus reclaimable.
	Available int
}

// Missing is how many more blocks the operation needed.
func (e *OutOfBlocksError) Missing() int { return e.Requested - e.Available }

func (e *OutOfBlocksError) Error() string {
	return fmt.Sprintf("blocks: out of blocks: requested %d, available %d (free + reclaimable)", e.Requested, e.Available)
}

// Unwrap returns ErrOutOfBlocks.
func (e *OutOfBlocksError) Unwrap() error { return ErrOutOfBlocks }

// BlockError names the operation and block behind a rejected call. It wraps one of the
// sentinel errors.
type BlockError struct {
	Op  string
	ID  ID
	Err error
}

func (e *BlockError) Error() string {
	return fmt.Sprintf("blocks: %s block %d: %s", e.Op, e.ID, strings.TrimPrefix(e.Err.Error(), "blocks: "))
}

// Unwrap returns the sentinel error.
func (e *BlockError) Unwrap() error { return e.Err }

// CountError reports a negative block count, as in Allocate(dst, -1). It wraps
// ErrInvalidArgument.
type CountError struct {
	Op string
	N  int
}

func (e *CountError) Error() string {
	return fmt.Sprintf("blocks: %s %d blocks: invalid argument", e.Op, e.N)
}

// Unwrap returns ErrInvalidArgument.
func (e *CountError) Unwrap() error { return ErrInvalidArgument }
