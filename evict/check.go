package evict

import "github.com/kvpage/kvpage/internal/invariant"

// checker counts a policy's mutations and, under -tags kvinvariants or -race, runs the
// policy's full check on internal/invariant's sample of them (every mutation while the count
// is small, then one in 64), panicking on a broken invariant. Callers guard it with
// `if invariant.Enabled`, so a normal build pays nothing.
type checker struct{ n uint64 }

func (c *checker) after(check func() error) {
	c.n++
	if invariant.Sample(c.n) {
		invariant.Check(check)
	}
}
