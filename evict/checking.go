package evict

import "fmt"

// verifier counts a policy's mutations and runs its full check on a sample of them: every
// mutation while the count is small, then one in 64 (as internal/invariant.Sample), so that
// big policies stay testable under -race. Callers guard it with `if checking`, so a normal
// build pays nothing.
type verifier struct{ n uint64 }

func (v *verifier) after(check func() error) {
	v.n++
	if v.n >= 1024 && v.n%64 != 0 {
		return
	}
	if err := check(); err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: %v", err))
	}
}
