package hybrid

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
)

// The package reports errors with blocktable's sentinels, so that a scheduler tests one
// set with errors.Is whichever Manager it drives.
var (
	errInvalid = blocktable.ErrInvalidArgument
	errUnknown = blocktable.ErrUnknownSeq
	errDup     = blocktable.ErrDuplicateSeq
	// errNilRequest refuses a nil *Request (or *prefix.Explanation) in the lookups, which
	// errors.Is recognises as blocktable.ErrInvalidArgument; a value, so that refusing
	// allocates nothing.
	errNilRequest = fmt.Errorf("hybrid: nil request: %w", errInvalid)
)

func outOfBlocks(op string, seq blocktable.SeqID, needed, available int) error {
	return &blocktable.SeqError{Op: op, Seq: seq, Err: &blocks.OutOfBlocksError{Requested: needed, Available: available}}
}

// seqErr is a *blocktable.SeqError, as blocktable.Manager returns for the same refusal,
// so that a scheduler reads the operation and the sequence with errors.As whichever
// Manager it drives.
func seqErr(op string, seq blocktable.SeqID, err error) error {
	return &blocktable.SeqError{Op: op, Seq: seq, Err: err}
}
