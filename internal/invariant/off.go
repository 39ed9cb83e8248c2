//go:build !(kvinvariants || race)

package invariant

// Enabled reports whether the kvinvariants build tag (or the race detector) is on.
const Enabled = false
