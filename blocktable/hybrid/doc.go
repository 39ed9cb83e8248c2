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
// group's blocks for the prompt, or its first chunk with Request.Prefill), Extend for the
// next prefill chunk, Append as tokens are computed (each group first releases what it no
// longer needs to the null block), Finish. Table, Slot and PackTables give the kernel its
// per-group block tables and slots; Match, MatchRequest and HitBlocks look up without
// touching anything; EvictBlocks drops given blocks from the cache (vLLM's evict_blocks).
// A Request carries a Namespace (LoRA adapter, cache salt: separate prefix trees), a
// HitLimit (fix a shorter hit) and SkipCacheRead (vLLM's skip_reading_prefix_cache);
// Config has Eagle (drop the last matched block, as vLLM for EAGLE/MTP), MatchUnit (vLLM's
// hash_block_size: groups with different block sizes over one match unit) and
// FreeUncachedFirst (vLLM's newer free order).
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
// node stays behind as a tombstone for the blocks after it. The queue and the refcounts
// are a blocks.FreeQueue, the index a prefix.GroupTree; the Manager composes the two. On vLLM's W4 workload the
// Manager reproduces vLLM's hit tokens and evictions exactly (bench/).
//
// # Errors, concurrency
//
// Errors wrap blocktable's sentinels (ErrInvalidArgument, ErrUnknownSeq,
// ErrDuplicateSeq, ErrOutOfBlocks); a failed call changes nothing. A Manager is not safe
// for concurrent use: one scheduler goroutine owns it. CheckInvariants verifies every
// group's accounting; under the kvinvariants build tag mutations re-check it, sampled.
//
// # Not yet here
//
// Mamba's align mode allocates as the generic path does (vLLM reuses a running block and
// the last state block step to step); vLLM's rule that a Mamba block cached in this step
// cannot serve another request before the next step is not modelled; there are no KV
// events, multimodal extra keys, lookahead slots, forks or CopyOps, host tiers, or sparse
// retention of window and state blocks (prefix_cache_retention_interval). The single-group
// blocktable.Manager and prefix.Index are separate and unchanged.
//
// # Extending
//
// A new kind of layer is a type implementing Spec (its block size, page bytes, which tokens
// it stops needing, and how it finds a hit over the cached blocks), registered with
// Register if it should be buildable by name.
package hybrid
