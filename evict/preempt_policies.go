package evict

import "cmp"

// FCFSPreemption preempts the newest sequence first (largest Arrival), ties by smallest ID:
// vLLM's default, which keeps first-come, first-served order by pausing the latest comer.
type FCFSPreemption struct{}

// NewFCFSPreemption returns the "fcfs" preemption policy.
func NewFCFSPreemption() FCFSPreemption { return FCFSPreemption{} }

// Name returns "fcfs".
func (FCFSPreemption) Name() string { return "fcfs" }

// Victims appends the newest sequences until their Freeable blocks cover need.
func (FCFSPreemption) Victims(dst []int, running []Candidate, need int) []int {
	return selectVictims(dst, running, need, newestFirst)
}

// Compare orders newest first (OrderedPreemption).
func (FCFSPreemption) Compare(a, b *Candidate) int { return newestFirst(a, b) }

// ReadsProgress is false: arrival order does not change as sequences run.
func (FCFSPreemption) ReadsProgress() bool { return false }

func newestFirst(a, b *Candidate) int { return cmp.Compare(b.Arrival, a.Arrival) }

// PriorityPreemption preempts the least important sequence first (largest Priority value,
// as in vLLM, where a larger value means less important), then the newest (largest
// Arrival), ties by smallest ID: vLLM's priority scheduling mode.
type PriorityPreemption struct{}

// NewPriorityPreemption returns the "priority" preemption policy.
func NewPriorityPreemption() PriorityPreemption { return PriorityPreemption{} }

// Name returns "priority".
func (PriorityPreemption) Name() string { return "priority" }

// Victims appends the least important, then newest, sequences until their Freeable blocks
// cover need.
func (PriorityPreemption) Victims(dst []int, running []Candidate, need int) []int {
	return selectVictims(dst, running, need, leastImportantFirst)
}

// Compare orders least important, then newest, first (OrderedPreemption).
func (PriorityPreemption) Compare(a, b *Candidate) int { return leastImportantFirst(a, b) }

// ReadsProgress is false: priority and arrival do not change as sequences run.
func (PriorityPreemption) ReadsProgress() bool { return false }

func leastImportantFirst(a, b *Candidate) int {
	if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
		return c
	}
	return newestFirst(a, b)
}

// ProgressPreemption preempts the sequence that has made the least progress first, in the
// order SGLang retracts decoding requests (ScheduleBatch.retract_decode): fewest generated
// output tokens (Output) first, and among equal outputs the longest prompt
// (Computed − Output) first, since it frees the most memory for the same lost decode work;
// ties by smallest ID (SGLang falls back to batch order).
type ProgressPreemption struct{}

// NewProgressPreemption returns the "progress" preemption policy.
func NewProgressPreemption() ProgressPreemption { return ProgressPreemption{} }

// Name returns "progress".
func (ProgressPreemption) Name() string { return "progress" }

// Victims appends the sequences with the least decode progress until their Freeable blocks
// cover need.
func (ProgressPreemption) Victims(dst []int, running []Candidate, need int) []int {
	return selectVictims(dst, running, need, leastProgressFirst)
}

// Compare orders least progress first (OrderedPreemption).
func (ProgressPreemption) Compare(a, b *Candidate) int { return leastProgressFirst(a, b) }

// ReadsProgress is true: Output and Computed grow as sequences run.
func (ProgressPreemption) ReadsProgress() bool { return true }

func leastProgressFirst(a, b *Candidate) int {
	if c := cmp.Compare(a.Output, b.Output); c != 0 {
		return c
	}
	return cmp.Compare(b.Computed-b.Output, a.Computed-a.Output)
}

// CostPreemption preempts the sequence that is cheapest to recompute per block it really
// frees first: smallest Computed / Freeable, compared exactly by cross-multiplication.
// Sequences with Freeable 0 (everything they hold is shared) free nothing and come last;
// ties by smallest ID.
type CostPreemption struct{}

// NewCostPreemption returns the "cost" preemption policy.
func NewCostPreemption() CostPreemption { return CostPreemption{} }

// Name returns "cost".
func (CostPreemption) Name() string { return "cost" }

// Victims appends the sequences with the fewest recomputed tokens per freed block until
// their Freeable blocks cover need.
func (CostPreemption) Victims(dst []int, running []Candidate, need int) []int {
	return selectVictims(dst, running, need, cheapestPerBlockFirst)
}

func cheapestPerBlockFirst(a, b *Candidate) int {
	af, bf := a.Freeable > 0, b.Freeable > 0
	switch {
	case af && !bf:
		return -1
	case !af && bf:
		return 1
	case !af && !bf:
		return 0
	}
	// a.Computed/a.Freeable vs b.Computed/b.Freeable, without division.
	return cmp.Compare(int64(a.Computed)*int64(b.Freeable), int64(b.Computed)*int64(a.Freeable))
}

var (
	_ OrderedPreemption = FCFSPreemption{}
	_ OrderedPreemption = PriorityPreemption{}
	_ OrderedPreemption = ProgressPreemption{}
)
