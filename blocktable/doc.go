// Package blocktable maps sequences onto paged KV blocks: the per-sequence Table (token
// position to physical block and flat slot) and the Manager that a scheduler drives
// (admit, append, fork, truncate, preempt, finish, abort) over a blocks.Pool and a
// prefix.Index.
//
// # Table
//
// Token position p of a sequence lives in entry p/B of Blocks() (integer division) at
// offset p%B, and its flat
// slot, what paged-attention kernels and vLLM's slot_mapping consume, is block x B +
// offset. A block is allocated only when every slot so far is taken; lookahead slots for
// draft tokens are reserved without being committed. FillRow and FillSlots write a table
// row (int32, padded with the null block 0) and a step's slot mapping (int64: the
// positions that hold tokens, then as many reserved lookahead slots as the caller names,
// padded with -1; never the empty tail of the last block) into the caller's slices, and
// Batch packs many rows into one reused, row-major [batch x maxBlocks] buffer. Every slot
// handed out for writing, a new token's or a reserved one's, lies in a block private to
// the sequence: reserving slots in a shared block copies it as writing does, and a Fork or
// Truncate that leaves the next position in a shared block cancels the reservation.
//
// Fork shares every block holding tokens (one more reference each). The first write into
// a shared, partly filled block copies it and reports a CopyOp{Src, Dst} that the server
// executes on the device before the step. Blocks past the last token's block are never
// shared, so one Append makes at most one copy. Truncate releases the blocks rejected
// speculative tokens no longer need. With a sliding window of W tokens, every block
// wholly before position (Len - W + 1) is released before an append and its entry points
// at the null block; the table never wraps around, so a shared block is never
// overwritten in place.
//
// # Manager
//
// Admit matches the prompt in the prefix index (capped at len-1 tokens by default, as
// vLLM caps it), counts every block it needs, including the hit blocks it would take off
// the evictable set, and only then takes the hit and allocates the rest: it either admits
// with the hit or returns an *blocks.OutOfBlocksError saying how many blocks were missing,
// having changed nothing. CanAdmit is the same check as a dry run. Append commits each
// block to the index as it fills (through a per-sequence prefix.Cursor, O(1) per block),
// so concurrent requests hit it before the first finishes; AppendToken is Append of one
// token, for a decode loop (the same result and errors, no slice to build). Finish caches the full blocks
// and releases everything; Abort releases without caching more. Preempt asks an
// evict.Preemption policy for victims and releases them (Recompute) or keeps their KV in
// the index's lower tiers (Swap, with Resume to bring them back; see below). A sequence preempted in Recompute
// mode is forgotten; admitted again, it re-hits its own blocks unless they were evicted.
// Preempt's accounting is exact: a victim's release counts what the pool and the index
// would really make available (a cached block stays pinned while a block below it is
// held, as after a duplicate commit), so a successful Preempt frees at least what was
// asked, and each candidate's evict.Candidate.Freeable is what preempting it alone frees.
// With an ordered policy (evict.OrderedPreemption: fcfs, priority, progress) a Preempt
// costs what its victims hold, not what every running sequence holds.
//
// Swap preemption is the lower tiers' own mechanism (an index built prefix.WithTiers; there
// is no second host pool): the victim's full blocks are held in the tiers
// (prefix.Index.Hold), those no lower tier has yet copied into tier 1 through the tiers'
// transfer plans (TakePlans, CompleteTransfer), and its device blocks released. A held
// block is evicted from no tier until the sequence resumes, finishes or is aborted; only
// a failed copy or a Reset drops it. Preempt refuses a swap tier 1 cannot take now
// (a *SeqError naming the victim, wrapping a *prefix.TierFullError; nothing changed; see prefix.Index.HoldNeed for what "now" counts
// under a write-back tier below it) and reports per victim what is free at once
// (Preempted.Freed) and what frees once its copies are done (Preempted.Awaiting). Resume
// admits the sequence again: its prefix is a device hit where the device still caches
// it, a load from the tiers past that, and the partial last block is computed again.
// Swap copies only blocks whose KV the server has computed: a server that swaps calls
// NewStep at the start of every scheduler step, once the previous step's forward pass
// has run (as vLLM's scheduler calls new_step_starts), and the blocks a sequence was
// given slots for since are computed again at Resume rather than copied without KV. A
// server that never calls NewStep must not swap a sequence out between the call that
// gave it slots for a full block and the forward pass that fills them. A server without
// prefix sharing that wants Swap builds the index anyway, with a host tier; without
// tiers Swap fails with ErrSwapNeedsTiers.
//
// Commits come before the forward pass, as vLLM's allocate_slots caches blocks: Admit
// and Append commit a block as soon as its tokens have slots, so that requests in the
// same step share it. No call fails after a commit: every refusal (out of blocks, a bad
// size, tier 1 full) is decided before the first block is committed, and a commit keys
// only tokens whose slots the call has already secured, so a refused call commits
// nothing and there is nothing to roll back. What a step committed holds no KV until the
// step's forward pass runs. A server whose pass does not run, or produces KV it rejects
// (an engine fault, a NaN check), must keep later requests from hitting those blocks:
// EvictBlocks (vLLM's evict_blocks) drops those blocks, and the cached blocks below them,
// from the index, and the sequences holding one commit nothing more; BumpEpoch of the
// namespace instead makes all its cached blocks unreachable at once, whatever is held.
//
// A sliding window (Config.SlidingWindow) runs without a prefix index: New refuses both
// together (ErrWindowWithIndex), since this Manager would never match a window's blocks.
// Prefix caching for sliding-window models, pure (Mistral 7B) or hybrid, is
// blocktable/hybrid's: a hybrid.Manager with one SlidingWindow group hits as vLLM's
// SlidingWindowManager does.
//
// # Errors
//
// Bad input and lack of memory return errors wrapping a sentinel (ErrUnknownSeq,
// ErrDuplicateSeq, ErrNotRunning, blocks.ErrOutOfBlocks, ErrShortBuffer, ErrSwapNeedsTiers,
// prefix.ErrTierFull,
// ErrInvalidArgument, ErrTooLarge, ErrWindowWithIndex), tested with errors.Is, and leave every structure
// exactly as it was. Every size, count and position is checked against the pool's
// capacity in slots before any arithmetic on it: a request the pool could never hold
// (ErrTooLarge, a *SizeError) is told apart from one that must wait for memory
// (blocks.ErrOutOfBlocks), and no sum can overflow. A finished, aborted or recompute-preempted sequence is forgotten, so appending to
// it returns ErrUnknownSeq. The package panics only for a broken invariant.
//
// # Invariants
//
// Every block's refcount equals its number of holders: table entries of running
// sequences plus the index's one reference on each cached block. Blocks past a table's
// last token block have exactly one holder. A sequence's cursor in the index stands at
// the end of its committed blocks, on the index's own copy where the sequence's block
// was a duplicate (the index finds the path again if that copy is evicted; if the path
// is gone, the Manager re-matches and caches the sequence's own blocks). CheckInvariants verifies all of it together with the
// pool's and the index's own checks; under the kvinvariants build tag (and -race) every
// mutation re-checks, sampled.
//
// # Concurrency
//
// Neither Table nor Manager is safe for concurrent use: one scheduler goroutine owns the
// Manager, its pool and its index, as in vLLM, SGLang and TensorRT-LLM.
//
// # Cost
//
// Append, AppendToken, slot lookups and FillRow/FillSlots/Pack allocate nothing in
// steady state: finished sequences' records are reused (at most one more is kept than
// the Manager has sequences, so a burst's records go back as its sequences finish), and
// token and block buffers keep their capacity (Request.MaxTokens sizes them once).
//
// Queries that return the Manager's own slices (Tokens, Blocks, Table.Blocks, a Batch's
// rows) are views, valid until the next call that changes the Manager (or the Table, or
// the next pack into the Batch), and clipped to their length so that an append copies;
// AppendTokens, AppendBlocks and AppendInputs give copies to keep.
//
// # Extending it
//
// A new preemption order is a policy of package evict (Config.Preemption); a new eviction
// order is one of the index's (prefix.WithPolicy). Models with several KV-cache groups are
// served by blocktable/hybrid, whose Spec is where a new kind of layer goes; the test kit
// for schedulers is blocktable/kvtest and the Prometheus collector blocktable/kvprom.
package blocktable
