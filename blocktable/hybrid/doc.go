// Package hybrid manages the KV cache of hybrid models: several KV-cache groups (full
// attention, sliding window, chunked local attention, Mamba state, non-cacheable scratch)
// whose sequences each hold one block table per group, all drawn from one pool, with
// prefix caching that works across them, with vLLM v1's semantics.
//
// # Use
//
// Describe each group with a Spec (a built-in type, or NewSpec with a kind added by
// Register), build a Manager over a pool size, and drive it per sequence: Admit (the hit
// every group can serve, found as vLLM's HybridKVCacheCoordinator finds it, then every
// group's blocks for the prompt), Append as tokens are computed (each group first releases
// what it no longer needs to the null block), Finish. Table, Slot and PackTables give the
// kernel its per-group block tables and slots.
//
// # Semantics
//
// The hit is vLLM's fixed point: full attention looked up first and once, every other
// kind of group accepting or lowering the length until it is stable, capped at the
// prompt's length - 1 and aligned to the LCM of the block sizes; groups with equal specs
// are looked up together. Admission counts every group's need, the hit blocks it takes off
// the free queue included, and changes nothing unless all of it is there. Released blocks
// join one free queue in vLLM's order (each group's blocks last first, group by group);
// allocation takes the queue's front and evicts it if it is cached, so a sliding-window
// block released mid-sequence is evicted in queue order like any other, while its prefix
// node stays behind as a tombstone for the blocks after it. On vLLM's W4 workload the
// Manager reproduces vLLM's hit tokens and evictions exactly (bench/).
//
// # Errors, concurrency
//
// Errors wrap blocktable's sentinels (ErrInvalidArgument, ErrUnknownSeq,
// ErrDuplicateSeq, ErrOutOfBlocks); a failed call changes nothing. A Manager is not safe
// for concurrent use: one scheduler goroutine owns it. CheckInvariants verifies every
// group's accounting; under the kvinvariants build tag mutations re-check it, sampled.
//
// # Extending
//
// A new kind of layer is a type implementing Spec (its block size, page bytes, which tokens
// it stops needing, and how it finds a hit over the cached blocks), registered with
// Register if it should be buildable by name.
package hybrid
