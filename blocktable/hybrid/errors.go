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

// missing is op's refusal of id, which names no running sequence, as blocktable.Manager
// refuses it: blocktable.ErrNotRunning for a sequence swapped out (only Resume and Finish
// take one), blocktable.ErrUnknownSeq for an ID the Manager does not know (never admitted,
// or finished). It is the refusal path only: a map look-up, no allocation but the error,
// kept out of line so that it does not weigh on its callers' hot paths (Append's).
//
//go:noinline
func (m *Manager) missing(op string, id blocktable.SeqID) error {
	if _, out := m.swapped[id]; out {
		return seqErr(op, id, blocktable.ErrNotRunning)
	}
	return seqErr(op, id, errUnknown)
}
