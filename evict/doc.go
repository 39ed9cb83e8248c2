// Package evict holds the policies that decide what leaves when memory runs out: eviction
// policies, which order the evictable cached blocks of a cache, and preemption policies,
// which choose the running sequences to pause. It imports no other package of this module
// but internal/, so a policy can be written and tested on its own.
//
// # Eviction
//
// A Policy orders candidates (Entry: a dense key such as a block ID, its last access on a
// logical Clock, a hit count, a retention priority) and pops victims. Keys are dense: a
// policy is built for keys in [0, capacity) and keeps flat arrays, so that it allocates
// nothing after construction. The prefix index builds its policy from a Factory with its
// own capacity and clock (prefix.WithPolicy), calls Add when a cached leaf becomes
// evictable, Remove when it is hit again, and Victim when it must evict. Built in (ByName
// returns each one's Factory, Names lists them):
//
//	lru       oldest LastAccess first (the default)                       NewLRU
//	fifo      first to become a candidate first (order of Add)            NewFIFO
//	mru       newest LastAccess first                                     NewMRU
//	lfu       smallest use count decayed with a half-life on the clock    NewLFU
//	priority  lowest retention priority first, LRU within a priority;     NewPriority
//	          TensorRT-LLM's KvCacheRetentionConfig semantics
//	slru      one-hit wonders (probation) before reused blocks            NewSLRU
//	s3fifo    one-hit wonders in a small FIFO drained first               NewS3FIFO
//
// and NewScored, built from a caller's scoring function. Each constructor's doc states its
// order exactly. A block counts as reused from Hits >= ReusedHits. A constructor refuses a
// capacity below 0 or above MaxCapacity, a percentage outside 0 (the default) to 100, and
// a nil clock or scoring function, with an *ArgumentError matching ErrInvalidArgument.
//
// # Preemption
//
// A Preemption policy receives the running sequences (Candidate) and the number of blocks
// needed, and returns, in order, just enough of them to cover the need by Freeable blocks.
// Built in (PreemptionByName, PreemptionNames): fcfs (newest first, vLLM's default),
// priority (vLLM's priority mode), progress (SGLang's retract order) and cost.
//
// # Contract
//
// Add, Remove and Victim cost O(log n) (Priority: amortised) and allocate nothing; Add of a
// candidate replaces its entry; Remove of a non-candidate reports false; Victim on an empty
// policy reports false; Reset drops everything. Time is a logical clock, never wall time,
// and every tie is broken by key (sequences: by ID), smallest first, so the same calls give
// the same victims on every machine. Policies and clocks are not safe for concurrent use;
// preemption policies are stateless values and may be shared.
//
// A cache that pops victims it then cannot take gives them back: a Restorer's Restore
// undoes Victim calls exactly, last first (FIFO, SLRU and S3FIFO implement it), and for
// any other policy Add with the victim's own Entry gives it back its rank, since its order
// is a function of the entries alone. The prefix index's lower tiers do this when they
// skip a victim whose copy in the tier below is bad.
//
// # Adding a policy
//
// A new eviction policy goes in its own file: an unexported type with the six Policy
// methods and a check method (the tests and -tags kvinvariants call it), and an exported
// constructor NewX(capacity, ...) Policy whose doc comment states the order exactly; its
// name in registry.go (ByName and evictionNames); and a case in the tests' policyCases with
// its order in the reference model, which holds every policy to its doc. The policy
// comparison (bench.BenchmarkEvictionPolicies, kvpage sim --eviction) then runs it by name.
// Its constructor checks its arguments with the helpers of errors.go (checkCapacity,
// checkShare) or returns an *ArgumentError of its own, so that bad input matches
// ErrInvalidArgument as every built-in's does. A policy whose order depends on more than
// each candidate's Entry and the clock (an arrival number, a segment it was moved to)
// implements Restorer too, with an exact undo, so that a victim given back keeps its place;
// the tests' restoreCases then hold it to that (TestVictimsGivenBackKeepTheirRank). A new preemption policy is an exported
// value type beside the built-ins in preempt_policies.go (Name, Victims, Compare,
// ReadsProgress), named in preempt_registry.go (preemptionNames and PreemptionByName),
// with its order in refVictims (preempt_test.go), the sort-based reference every
// preemption policy is held to.
package evict
