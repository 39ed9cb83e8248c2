package kvtest

import "github.com/kvpage/kvpage/blocks"

// Fault injection, so that a scheduler can test its out-of-memory paths against the real
// stack. Faults change what the pool reports and hands out, never the structure: the
// invariant and leak checks keep holding. See blocks.Faults for the exact semantics.

// FailAllocation makes the k-th allocation from now (k >= 1) fail with ErrOutOfBlocks,
// once. The Manager checks availability before it allocates, so the failure reaches it at
// that check: the k-th Admit, Append (that needs a block) or SwapIn from now returns an
// *blocks.OutOfBlocksError and changes nothing. (A CanAdmit, or PreemptSeq's own
// accounting, in between counts as that check too.) k <= 0 disarms it.
func (e *Env) FailAllocation(k int) {
	e.faultsOn().FailIn = max(k, 0)
}

// Shrink makes the pool report n fewer blocks, as if something else held them: admission
// and growth see a smaller pool with the same cache. Shrink(0) undoes it.
func (e *Env) Shrink(n int) {
	e.faultsOn().Hidden = max(n, 0)
}

// Heal removes every fault.
func (e *Env) Heal() {
	e.faults = nil
	e.Pool.SetFaults(nil)
}

// Faults returns the pool's faults, nil when none were injected.
func (e *Env) Faults() *blocks.Faults { return e.faults }

func (e *Env) faultsOn() *blocks.Faults {
	if e.faults == nil {
		e.faults = &blocks.Faults{}
		e.Pool.SetFaults(e.faults)
	}
	return e.faults
}
