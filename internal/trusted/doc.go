// Package trusted carries the calls that the module's own packages make to each other on
// paths whose inputs they have already validated and whose invariants they keep: the
// Manager releasing the blocks its tables hold, or acquiring a path the index has just
// matched for it. The public methods check every argument so that bad input leaves the
// state unchanged; on these calls the check is the caller's invariant, and repeating it
// per block in every layer was the largest single cost of W3's hot path (see bench/README,
// issue 19). Nothing outside the module can import this package; under -tags kvinvariants
// the full checks run anyway and a violation panics.
package trusted
