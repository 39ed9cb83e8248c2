package prefix

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/argerr"
)

// Sentinel errors. Every error the index returns for bad input wraps one of these (test with
// errors.Is), and a call that fails leaves the index and the pool exactly as they were.
var (
	// ErrInvalidArgument: a bad block size, a nil pool, a pool already serving another index.
	// It matches (errors.Is) blocks.ErrInvalidArgument, blocktable.ErrInvalidArgument
	// and every other package's invalid-argument sentinel, and they match it: one
	// errors.Is test covers them all, whichever package refused.
	ErrInvalidArgument = argerr.New("prefix: invalid argument")
	// ErrLengthMismatch: the prompt holds fewer tokens than the blocks given to Commit cover.
	ErrLengthMismatch = errors.New("prefix: tokens and blocks disagree in length")
	// ErrNotHeld: Commit was given a block the caller does not hold (free, null, unknown,
	// or cached and held by nobody but the index).
	ErrNotHeld = errors.New("prefix: block not held by the caller")
	// ErrNotCached: Acquire was given a block that is not cached.
	ErrNotCached = errors.New("prefix: block not cached")
	// ErrNotAcquired: Release was given a cached block held by nobody but the index.
	ErrNotAcquired = errors.New("prefix: block not acquired")
	// ErrAlreadyCached: Commit was given a block that is already cached somewhere else, or
	// the same new block twice.
	ErrAlreadyCached = errors.New("prefix: block already cached elsewhere")
	// ErrBlocksHeld: Reset while a request holds a cached block.
	ErrBlocksHeld = errors.New("prefix: cached blocks are held by requests")
	// ErrEmptyNamespace: the zero Namespace in an index built WithNamespaceRequired.
	ErrEmptyNamespace = errors.New("prefix: namespace required")
	// ErrInvalidCursor: a cursor that no Peek or Commit of this index produced.
	ErrInvalidCursor = errors.New("prefix: invalid cursor")
	// ErrNotPinned: Unpin was given a block without a pin.
	ErrNotPinned = errors.New("prefix: block not pinned")
)

// MaxBlockSize is the largest block size the index accepts: 2^16 tokens, far past any
// attention kernel's (vLLM's largest is a few thousand, for Mamba state).
const MaxBlockSize = 1 << 16

// MaxArenaTokens bounds the index's token arena, a pool's blocks x block size tokens (4 bytes
// each): 2^32 tokens is 16 GiB, beyond any device's KV cache in tokens.
const MaxArenaTokens = 1 << 32

// SizeError reports a size outside what the index accepts. It wraps ErrInvalidArgument.
type SizeError struct {
	What   string
	N, Max int64
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("prefix: %s %d outside [1, %d]", e.What, e.N, e.Max)
}

// Unwrap returns ErrInvalidArgument.
func (e *SizeError) Unwrap() error { return ErrInvalidArgument }

// BlockError names the operation and the block behind a rejected call. It wraps one of the
// sentinel errors (or, for a block the pool rejects, the pool's error).
type BlockError struct {
	Op  string
	ID  blocks.ID
	Err error
}

func (e *BlockError) Error() string {
	return fmt.Sprintf("prefix: %s block %d: %s", e.Op, e.ID, strings.TrimPrefix(e.Err.Error(), "prefix: "))
}

// Unwrap returns the wrapped error.
func (e *BlockError) Unwrap() error { return e.Err }

// LengthError says how many tokens Commit needed and how many the prompt had. It wraps
// ErrLengthMismatch.
type LengthError struct {
	Need, Have int
}

func (e *LengthError) Error() string {
	return fmt.Sprintf("prefix: blocks cover %d tokens but the prompt has %d", e.Need, e.Have)
}

// Unwrap returns ErrLengthMismatch.
func (e *LengthError) Unwrap() error { return ErrLengthMismatch }

// HeldError says how many cached blocks requests still hold. It wraps ErrBlocksHeld.
type HeldError struct{ Held int }

func (e *HeldError) Error() string {
	return fmt.Sprintf("prefix: %d cached blocks are held by requests (or lie under one that is)", e.Held)
}

// Unwrap returns ErrBlocksHeld.
func (e *HeldError) Unwrap() error { return ErrBlocksHeld }
