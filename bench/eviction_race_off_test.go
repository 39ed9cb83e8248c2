//go:build !race

package bench

// raceEnabled reports whether the race detector is on (internal/invariant.Enabled is also
// true under -tags kvinvariants, where the eviction tests are fast).
const raceEnabled = false
