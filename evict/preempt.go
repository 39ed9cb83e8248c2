package evict

// Candidate describes one running sequence to a preemption policy: what the policy needs
// to rank it (blocktable.SeqInfo is what the Manager tells its caller about a sequence).
type Candidate struct {
	// ID is the scheduler's sequence ID. Ties in every policy are broken by ID.
	ID uint64
	// Priority is the scheduling priority; as in vLLM, a larger value means less important.
	Priority int
	// Arrival is the logical order of arrival: a larger value arrived later.
	Arrival uint64
	// Computed is the number of tokens whose KV the sequence holds (the work lost when it is
	// preempted in recompute mode): prompt tokens computed plus output tokens generated.
	Computed int
	// Output is how many of the Computed tokens are generated output rather than prompt
	// (decode progress). The "progress" policy orders by it, as SGLang's retraction does;
	// other policies ignore it.
	Output int
	// Held is the number of blocks in the sequence's table.
	Held int
	// Freeable is how many blocks preempting it would really return to the pool: blocks
	// shared with other sequences (forks, prefix hits) stay.
	Freeable int
}

// Preemption chooses which running sequences to pause when the pool cannot grow a sequence.
type Preemption interface {
	// Name is the policy's short name ("fcfs", "priority", "progress", "cost").
	Name() string
	// Victims appends to dst, in the order they should be preempted, the indices into running
	// of sequences whose preemption frees at least need blocks (by Freeable), and returns dst.
	// It may return fewer when even all of them cannot. It must not modify running, and it
	// allocates nothing when dst has room.
	//
	// The built-in policies append just enough victims, taken in policy order, for their
	// Freeable blocks to add up to need; when even all of them fall short they append all of
	// them (the caller decides whether that is worth it); for need <= 0 they append none.
	Victims(dst []int, running []Candidate, need int) []int
}

// OrderedPreemption is a Preemption whose order reads neither Freeable nor Held: it ranks
// sequences by their own fields, so a caller can keep the running sequences in that order
// as they come and go and walk victims from the front, computing what each frees only for
// the victims it takes. blocktable.Manager does so: its Preempt then costs what the victims
// hold, not what every running sequence holds. The fcfs, priority and progress policies
// are ordered; cost is not (it ranks by Freeable).
type OrderedPreemption interface {
	Preemption
	// Compare is negative when a is to be preempted before b, positive when after, and 0
	// when the policy does not tell them apart (the caller breaks ties by smallest ID). It
	// reads only ID, Priority, Arrival, Computed and Output, and its result for two
	// sequences changes only when those fields do.
	Compare(a, b *Candidate) int
	// ReadsProgress reports whether Compare reads Computed or Output, which change as a
	// sequence runs; a caller keeping an order must then re-place a sequence that grows.
	ReadsProgress() bool
}
