// Package trusted carries the calls that the module's own packages make to each other on
// paths whose inputs they have already validated and whose invariants they keep: the
// Manager releasing the blocks its tables hold, or acquiring a path the index has just
// matched for it. The public methods check every argument so that bad input leaves the
// state unchanged; on these calls the check is the caller's invariant, and repeating it
// per block in every layer was the largest single cost of W3's hot path (see bench/README,
// issue 19). Nothing outside the module can import this package; under -tags kvinvariants
// the full checks run anyway and a violation panics.
package trusted

import "github.com/kvpage/kvpage/blocks"

// ReleaseHeld is prefix.Index.Release for ids that the caller holds, each once, as a
// Manager's table does: it skips the per-block check that each cached block is held
// (the pool still refuses a free block). index is a *prefix.Index. Package prefix
// installs it.
var ReleaseHeld func(index any, ids []blocks.ID)

// AcquireMatched is prefix.Index.Acquire for a path the index has just matched (Peek) and
// whose refcounts the caller has checked against blocks.MaxRefCount: it skips the pass
// that checks each block is cached. Package prefix installs it.
var AcquireMatched func(index any, ids []blocks.ID)
