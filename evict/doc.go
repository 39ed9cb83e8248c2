// Package evict holds the policies that decide what leaves when memory runs out: eviction
// policies, which order the evictable cached blocks of a cache, and preemption policies,
// which choose the running sequences to pause. It imports no other package of this module,
// so a policy can be written and tested on its own.
//
// # Eviction
//
// A Policy orders candidates (Entry: a key such as a block ID, its last-access time on a
// logical Clock, a hit count, a retention priority) and pops victims. Time is always a
// logical clock, never wall time, and every tie is broken by key, smallest first, so every
// run is reproducible. LRU by last access is the default.
//
// # Preemption
//
// A Preemption policy receives the running sequences (SeqInfo) and the number of blocks
// needed, and returns the order in which to pause them.
//
// # Concurrency
//
// Policies and clocks are not safe for concurrent use; the cache or scheduler that owns one
// drives it from one goroutine.
//
// # Invariants
//
// A candidate is in a policy at most once; Len is the number of candidates; Victim returns
// only keys that were added and not since removed.
package evict
