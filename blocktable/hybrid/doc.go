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
// longer needs to the null block), Finish. Table, Slot, FillSlots and PackTables give the
// kernel its per-group block tables and slot mappings, Reserve a speculative step's
// lookahead slots; Match, MatchRequest and HitBlocks look up without touching anything,
// and AdmitCost is Admit's dry run (its hit and the blocks each group would take);
// EvictBlocks drops given blocks from the device's cache (vLLM's evict_blocks; lower
// tiers' copies stay): what a server calls for the blocks a step committed when that
// step's forward pass did not run or its KV was rejected, since Admit, Extend and Append
// cache full blocks before the pass, as vLLM's allocate_slots does (each decides every
// refusal before its first commit, so a refused call caches nothing). Table, Tokens
// and Groups are views, clipped so that an append copies and valid until the next call
// that changes the Manager; AppendTable and AppendTokens give copies. Fork shares a
// sequence's blocks in every group (parallel sampling): the first write into a shared,
// partly filled block copies it, and TakeCopies hands the step's copies, per group, to the
// kernel. Preempt asks a preemption policy of package evict (Config.Preemption) for
// victims and releases them as Finish does (recompute mode); the scheduler admits them
// again with their tokens (Request.Resumed) and they re-hit what stayed cached. Freeable
// says what preempting one sequence frees. StatsCell publishes Stats to other goroutines
// without a lock; blocktable/kvtest's NewHybrid is the test kit.
// A Request carries a Namespace (LoRA adapter, cache salt: separate prefix trees), a
// HitLimit (fix a shorter hit) and SkipCacheRead (vLLM's skip_reading_prefix_cache);
// Config has Eagle (drop the last matched block, as vLLM for EAGLE/MTP), MatchUnit (vLLM's
// hash_block_size: groups with different block sizes over one match unit),
// FreeUncachedFirst (vLLM's newer free order) and SparseRetention with RetentionInterval
// (vLLM's prefix_cache_retention_interval: window and Mamba groups cache only the blocks a
// hit at a retained boundary needs). Mamba groups run vLLM's cache modes, align included
// (one running state block per sequence; AlignedChunk splits a prefill on block
// boundaries so that their states are cached). Config.Observer receives the prefix
// index's events, each naming its KV-cache group (prefix/kvevents publishes them with
// vLLM's group_idx); ResetPrefixCache empties the cache, as vLLM's reset_prefix_cache
// (and, unlike vLLM's, every lower tier too).
//
// # Lower tiers
//
// Config.Tiers (a prefix.TierConfig, as prefix.WithTiers takes) gives the prefix index
// host, disk or user tiers below the device, each with its capacity in blocks and its
// eviction policy: an entry a tier holds keeps its prefix node, per (node, group). Tier
// 1's write policy copies device blocks down (write-through when cached, after N hits,
// or write-back ahead of need: the free queue's next FreeTarget victims), and a copied
// block stays held (unavailable) until the server confirms the copy. AdmitTiered finds
// the device hit, then the longest hit every group can serve with the blocks past it read
// from the lower tiers (full attention needs every block, a sliding window those inside
// its window, Mamba the state at the hit), reserves the sequence's own blocks for that
// span and prepares their load; MatchTiers looks the same up touching nothing.
// TakePlans and CompleteTransfer drive the copies exactly as blocktable.Manager's (the
// same prefix.Plan, TransferID and TransferResult): a load that completes ok caches the
// blocks, a failed one evicts the keys and says how many tokens to compute. Swap
// preemption holds a victim's blocks in the tiers and Resume admits it again (below).
// Events carry the tier's medium and report each tier a block enters once, one event per
// group's chain of blocks a transfer moves. A lower-tier hit that needs no block loaded
// (its blocks all before the groups' windows or chunks) is a pure hit, with no transfer.
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
// are a blocks.FreeQueue, the index a prefix.GroupTree; the Manager composes the two.
// On vLLM's W4 workload the Manager reproduces vLLM's hit tokens and evictions exactly
// (bench/).
//
// A Preempt's count is exact: every unreferenced block joins the free queue, cached or
// not, so a victim frees the blocks no other sequence holds, and the shortest prefix of
// the policy's order that frees the need is taken; a successful Preempt frees at least
// that. With an ordered policy (fcfs, priority, progress) the Manager keeps the running
// sequences in the policy's order, so a Preempt costs what its victims hold however many
// sequences run; with cost, or a policy of one's own, it describes every running sequence
// from a Freeable it keeps exact as they run, O(n log n) in n running sequences.
// Swap mode needs lower tiers (else blocktable.ErrNoHostPool), and keeps
// blocktable.Manager's contract: a victim's cached blocks, every group's, are held in the
// lower tiers (prefix.GroupTree.Hold), those no tier holds yet copied into tier 1 first,
// and a held copy is evicted from no tier until Resume or Finish releases the hold (only
// a failed copy or ResetPrefixCache drops it). A swap tier 1 cannot take now is refused
// with a *blocktable.SeqError (Op "swap out") naming the victim, wrapping a
// *prefix.TierFullError (prefix.ErrTierFull), nothing changed; Preempt checks its
// victims together. Preempted.Freed counts what is free at once, Preempted.Awaiting
// the blocks that return to the free queue once their copies are handed out (TakePlans,
// under TierConfig.StreamOrdered) or confirmed (CompleteTransfer, otherwise); Freed +
// Awaiting is what Preempt counts against Need. Resume of a sequence whose copies are
// handed out and not yet confirmed (StreamOrdered), and whose device blocks an allocation
// took meanwhile, waits, as blocktable.Manager's does: blocktable.ErrSwapInFlight,
// nothing changed; while the device still caches them it hits them there.
//
// # Errors, concurrency
//
// Errors wrap blocktable's sentinels (ErrInvalidArgument, ErrUnknownSeq, ErrNotRunning,
// ErrDuplicateSeq, ErrShortBuffer, ErrNoHostPool) and blocks.ErrOutOfBlocks; a refusal
// about one sequence is a *blocktable.SeqError naming the operation and the sequence, as
// blocktable.Manager's; a failed call changes nothing. As there, a call that needs a
// running sequence fails with ErrNotRunning for one swapped out, and every call with
// ErrUnknownSeq for an ID never admitted or already finished (Finish of a swapped-out
// sequence included: it releases its lower-tier hold and forgets it). The queries Seq,
// Tokens, Contains and Seqs answer for a swapped-out sequence too (SeqInfo.State says
// which), as there. A Manager is not safe
// for concurrent use: one scheduler goroutine owns it. CheckInvariants verifies every
// group's accounting; under the kvinvariants build tag mutations re-check it, sampled.
//
// # Not yet here
//
// vLLM's rule that a Mamba block cached in this step cannot serve another request before
// the next step is not modelled, nor its speculative Mamba blocks (num_speculative_blocks)
// or the shared-prefix junction that its sparse retention also keeps (Marconi). There is no
// Truncate of rejected draft tokens (Reserve's lookahead is reused by the next step
// instead), and no multimodal extra keys. A load continues only past the device hit with
// blocks a lower tier holds (a block past it that only the device holds ends the
// continuation), and a failed load's recompute has none of the window's blocks or Mamba
// state before the load (only those at the hit were loaded).
// blocktable.Manager refuses a sliding window with a prefix index; this package is where
// a pure sliding-window model (one SlidingWindow group) gets its prefix hits.
//
// # Extending
//
// A new kind of layer is a type implementing Spec (its block size, page bytes, which tokens
// it stops needing, and how it finds a hit over the cached blocks), registered with
// Register if it should be buildable by name.
package hybrid
