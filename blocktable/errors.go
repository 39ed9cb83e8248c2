package blocktable

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvpage/kvpage/internal/argerr"
)

// Sentinel errors. Every error the package returns for bad input wraps one of these, so
// callers test with errors.Is; a failed call changes nothing. Lack of memory is the pool's
// error: a *SeqError (naming the operation and sequence) wrapping a
// *blocks.OutOfBlocksError, which matches blocks.ErrOutOfBlocks and says how many blocks
// were requested and available.
var (
	// ErrUnknownSeq: no such sequence (never admitted, or already finished, aborted or
	// preempted in recompute mode).
	ErrUnknownSeq = errors.New("blocktable: unknown sequence")
	// ErrDuplicateSeq: the ID is already in use.
	ErrDuplicateSeq = errors.New("blocktable: duplicate sequence")
	// ErrNotRunning: the sequence is swapped out (or, for Resume, not swapped).
	ErrNotRunning = errors.New("blocktable: sequence not in the required state")
	// ErrShortBuffer: a caller's slice cannot hold the result.
	ErrShortBuffer = errors.New("blocktable: buffer too short")
	// ErrSwapNeedsTiers: Swap mode without an index built prefix.WithTiers. Swap keeps a
	// victim's KV in the index's lower tiers, kvpage's only host memory (Config.HostPool,
	// a second pool beside them, is gone): build the index with a host tier, even without
	// prefix sharing, or preempt in Recompute mode.
	ErrSwapNeedsTiers = errors.New("blocktable: swap needs an index with lower tiers (prefix.WithTiers)")
	// ErrSwapInFlight: Resume of a sequence some of whose swapped-out blocks exist only
	// in a copy in flight (under prefix.TierConfig.StreamOrdered, a copy TakePlans handed
	// out, which released its device block, whose block an allocation has taken since,
	// and CompleteTransfer has not confirmed). No
	// lookup finds such a block until then, so resuming now would compute it again: the
	// sequence waits, its state unchanged, and Resume succeeds once the copies complete.
	ErrSwapInFlight = errors.New("blocktable: the sequence's swap-out copies are in flight")
	// ErrNoHostPool is ErrSwapNeedsTiers under its former name, kept so that errors.Is
	// tests written for it still match.
	ErrNoHostPool = ErrSwapNeedsTiers
	// ErrInvalidArgument: an empty prompt, a negative count, a position or length out of
	// range, a bad configuration. It matches (errors.Is) blocks.ErrInvalidArgument,
	// prefix.ErrInvalidArgument and every other package's invalid-argument sentinel, and
	// they match it: one errors.Is test covers them all, whichever package refused.
	ErrInvalidArgument = argerr.New("blocktable: invalid argument")
	// ErrTooLarge: a size or count that no amount of preemption could ever satisfy (more
	// slots than the whole pool holds) or that would overflow. Unlike blocks.ErrOutOfBlocks,
	// retrying after a Preempt cannot help: reject the request. Also matches
	// ErrInvalidArgument.
	ErrTooLarge = errors.New("blocktable: size beyond the pool's capacity")
	// ErrWindowWithIndex: Config.SlidingWindow together with Config.Index. The
	// single-group Manager caches no sliding-window blocks, so the index would never get a
	// hit; prefix caching for a sliding-window model is blocktable/hybrid's (a Manager with
	// one hybrid.SlidingWindow group matches as vLLM's SlidingWindowManager does). New
	// returns it rather than silently caching nothing. Also matches ErrInvalidArgument.
	ErrWindowWithIndex = errors.New("blocktable: a sliding window caches no prefix here; use blocktable/hybrid with a SlidingWindow group for prefix hits, or no Index")
)

// SizeError reports a size, count or position beyond what the pool could ever hold, or
// one whose arithmetic would overflow. It matches ErrTooLarge and ErrInvalidArgument.
type SizeError struct {
	// Op is the operation ("admit", "append", "new", ...).
	Op string
	// Seq is the sequence concerned (0 for a Table or a configuration).
	Seq SeqID
	// What names the argument ("lookahead", "prompt", ...).
	What string
	// N is the value passed; Max the largest the call could accept.
	N, Max int
}

// Error names the operation, the argument and the limit.
func (e *SizeError) Error() string {
	return fmt.Sprintf("blocktable: %s seq %d: %s %d beyond the limit %d", e.Op, e.Seq, e.What, e.N, e.Max)
}

// Unwrap returns ErrTooLarge and ErrInvalidArgument.
func (e *SizeError) Unwrap() []error { return []error{ErrTooLarge, ErrInvalidArgument} }

// SeqError names the operation and sequence behind a rejected call; it wraps a sentinel.
type SeqError struct {
	Op  string
	Seq SeqID
	Err error
}

// Error names the operation, the sequence and the sentinel.
func (e *SeqError) Error() string {
	return fmt.Sprintf("blocktable: %s seq %d: %s", e.Op, e.Seq, strings.TrimPrefix(strings.TrimPrefix(e.Err.Error(), "blocktable: "), "blocks: "))
}

// Unwrap returns the sentinel error.
func (e *SeqError) Unwrap() error { return e.Err }
