//go:build kvinvariants || race

package invariant

// Enabled reports whether the kvinvariants build tag (or the race detector) is on. When it
// is, every mutation of a stateful type re-checks that type's invariants and freed metadata
// is poisoned, so that a use after free shows up at once.
const Enabled = true
