// Package invariant holds the switch for the kvinvariants build tag and the helpers that
// stateful types use to act on it.
//
// Build or test with -tags kvinvariants (or -race, which turns it on too) and every pool,
// index, table and manager re-checks its invariants after each mutation, sampled where a
// full check is expensive, and panics with the broken invariant: a broken invariant is a
// bug in this module, never bad input. In a normal build the checks compile away.
//
// It is internal: no user of the module should depend on it.
package invariant

import "fmt"

// Check panics with err when invariant checking is enabled and err is not nil. Callers
// pass a closure so that nothing is computed in a normal build.
func Check(check func() error) {
	if !Enabled {
		return
	}
	if err := check(); err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: %v", err))
	}
}

// Sample reports whether the n-th mutation should run an expensive full check: every
// mutation while n is small, then one in every 64, so that big structures stay testable.
func Sample(n uint64) bool {
	return Enabled && (n < 1024 || n%64 == 0)
}
