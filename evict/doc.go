// Package evict holds the policies that decide what leaves when memory runs out: eviction
// policies, which order the evictable cached blocks of a cache, and preemption policies,
// which choose the running sequences to pause. It imports no other package of this module,
// so a policy can be written and tested on its own.
//
// # Eviction
//
// A Policy orders candidates (Entry: a key such as a block ID, its last-access time on a
// logical Clock, a hit count, a retention priority) and pops victims. The prefix index
// calls Add when a cached leaf becomes evictable, Remove when it is hit again or dropped,
// and Victim when it must evict. Built in (New builds each from its name, Names lists
// them):
//
//	lru       oldest LastAccess first (the default)                       LRU
//	fifo      first to become a candidate first (order of Add)            FIFO
//	mru       newest LastAccess first                                     MRU
//	lfu       smallest use count decayed with a half-life on the clock    LFU
//	priority  lowest retention priority first, LRU within a priority;     Priority
//	          TensorRT-LLM's KvCacheRetentionConfig semantics
//	slru      one-hit wonders (probation) before reused blocks            SLRU
//	          (protected, capped at a share of the candidates)
//	s3fifo    one-hit wonders in a small FIFO drained first while it      S3FIFO
//	          holds its share, then a main FIFO of reused blocks
//
// and Scored, built from a caller's scoring function. Each type's doc comment states its
// order exactly; the tests hold every policy to a reference model written from those
// comments. A block counts as reused from Hits >= ReusedHits (the index stores content with
// Hits 1 and adds one per hit).
//
// A new policy goes in its own file: a type with a constructor, Name, the five Policy
// methods and CheckInvariants; its name in registry.go (New and evictionNames); a case in
// policyCases and in the reference model (ref_test.go) of the tests; and, for the policy
// comparison, nothing more: bench.BenchmarkEvictionPolicies runs every name in Names.
// Most orders are a rank (a, b) plus the key in rankHeap, an indexed binary heap that
// allocates nothing once it has reached its working size.
//
// # Preemption
//
// A Preemption policy receives the running sequences (SeqInfo) and the number of blocks
// needed, and returns, in order, just enough of them to cover the need by Freeable blocks
// (all of them when even all fall short). Built in (PreemptionByName, PreemptionNames):
// fcfs (newest first, vLLM's default), priority (largest Priority value, then newest:
// vLLM's priority mode), progress (fewest Output tokens, then longest prompt: SGLang's
// retract order) and cost (fewest Computed tokens per Freeable block; Freeable 0 last).
//
// # Contracts
//
//   - Add, Remove and Victim cost O(log n) or better (Priority: amortised, since each
//     candidate's retention expires at most once per Add) and allocate nothing in steady
//     state; Victims allocates nothing when dst has room for the victims.
//   - Add of a key that is already a candidate replaces its entry; Remove of a key that is
//     not one reports false and changes nothing; Victim on an empty policy reports false.
//   - Reset drops every candidate and any history.
//
// # Determinism
//
// Time is always a logical clock, never wall time; LFU and Priority compute with integers
// only; every tie is broken by key (sequences: by ID), smallest first. The same calls
// therefore give the same victims on every run and every machine. Scored is as
// deterministic as the caller's function.
//
// # Concurrency
//
// Policies and clocks are not safe for concurrent use; the cache or scheduler that owns one
// drives it from one goroutine. Preemption policies are stateless values and may be shared.
//
// # Invariants
//
// A candidate is in a policy at most once; Len is the number of candidates; Victim returns
// only keys that were added and not since removed. Each policy's CheckInvariants verifies
// its structure (heap order, key index, segment caps); under -tags kvinvariants or -race
// every policy runs it after its mutations (all of the first 1,024, then one in 64) and
// panics on a broken invariant.
package evict
