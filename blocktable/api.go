package blocktable

// This file holds the Manager's public types: configuration, requests, results, states
// and statistics.

import (
	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
)

// SeqID is the scheduler's identifier of one sequence (a request, or one branch of a
// parallel-sampling or beam-search request). IDs are chosen by the caller; an ID can be
// used again once its sequence has finished, been aborted or been preempted in recompute
// mode.
type SeqID uint64

// CopyOp is one block copy the server must execute on the device before the step that
// uses Dst: copy-on-write after a fork (Src is the shared block, Dst the sequence's new
// private copy).
type CopyOp struct {
	Src, Dst blocks.ID
}

// PreemptMode says what preemption does with a victim's KV.
type PreemptMode uint8

const (
	// Recompute releases the victim's blocks (its full blocks stay cached in the prefix
	// index, so readmission re-hits them unless they were evicted) and forgets the
	// sequence: the scheduler admits it again later with its prompt and generated tokens.
	Recompute PreemptMode = iota
	// Swap keeps the victim's KV in the index's lower tiers and the sequence, swapped
	// out, until Resume brings it back: its full blocks are held in the tiers
	// (prefix.Index.Hold), copied into tier 1 through the tiers' transfer plans where no
	// lower tier has them yet, and its device blocks are released (see tiers.go). It needs
	// an index built prefix.WithTiers (without one, Swap fails with ErrSwapNeedsTiers): the
	// tiers are kvpage's only host memory. A server without prefix sharing builds that
	// index anyway, with a host tier; its prompts are simply rarely shared.
	Swap
)

// Config configures a Manager. Pool and BlockSize are required.
type Config struct {
	// Pool is the device block pool. The Manager assumes it is the pool's only user (with
	// the Index): CheckInvariants counts every holder of every block.
	Pool *blocks.Pool
	// Index is the prefix index over Pool, built with the same block size. Nil disables
	// prefix caching: no matching, no committing, Finish releases like Abort.
	Index *prefix.Index
	// BlockSize is the number of tokens per block (16 is typical).
	BlockSize int
	// Preemption orders victims for Preempt. Nil means newest first (vLLM's FCFS default).
	Preemption evict.Preemption
	// Watermark is the fraction of usable blocks (0 to 1) that Admit keeps available
	// (free or reclaimable), as vLLM's watermark, so that admitting new sequences does not
	// leave running ones unable to grow. Append and Fork ignore it. 0 disables it.
	Watermark float64
	// SlidingWindow, when positive, is the attention window in tokens of every sequence:
	// blocks wholly outside the window are released and their table entries point at the
	// null block (the pool must have one). It cannot be combined with Index (New fails
	// with ErrWindowWithIndex): for prefix hits on a sliding-window model, use
	// blocktable/hybrid with one hybrid.SlidingWindow group. 0 means full attention.
	SlidingWindow int
	// Clock is the logical clock shared with the index (pass the same one to
	// prefix.WithClock). The Manager stamps each admission with Tick, which orders
	// arrivals for preemption. Nil means a private evict.Counter.
	Clock evict.Clock
	// FullPromptHit lets a prefix hit cover the whole prompt. By default a hit is capped so
	// that at least one prompt token is left to compute, as vLLM caps it at len-1: the
	// model needs the last prompt token's logits.
	FullPromptHit bool
}

// Request is what Admit needs to know about a new sequence.
type Request struct {
	// Namespace keeps apart requests that must never share blocks (LoRA adapter, salt).
	Namespace prefix.Namespace
	// Prompt is the prompt's token ids. The Manager copies them.
	Prompt []int32
	// MM lists the prompt's multimodal inputs (sorted by Offset; nil for text). The
	// Manager copies them, into a buffer its sequence records keep for reuse: the caller
	// may change or reuse the slice once Admit returns.
	MM []prefix.MMInput
	// Prefill, when positive, caps how many prompt tokens past the prefix hit get slots
	// now: the first chunk of a chunked prefill. Admit still matches the whole prompt;
	// the caller passes each later chunk's tokens to Append. 0 means the whole prompt.
	Prefill int
	// Lookahead reserves slots for that many tokens beyond the prompt (draft tokens of
	// speculative decoding) without committing them.
	Lookahead int
	// Priority is the scheduling priority; as in vLLM, a larger value is less important.
	Priority int
	// Retention is the eviction priority of the blocks the sequence commits to the prefix
	// index (see prefix.Prompt.Retention); the zero value asks for none. Only the "priority"
	// eviction policy reads it. A Priority above evict.MaxPriority (101-255) is refused
	// with ErrInvalidArgument, changing nothing, not taken as MaxPriority.
	Retention prefix.Retention
	// MaxTokens, when positive, is a hint of the sequence's final length, so that its
	// token and block buffers are sized once.
	MaxTokens int
	// Resumed marks a request that was preempted (in recompute mode) and is admitted
	// again. Its prefix hit, mostly its own blocks from before, is counted apart
	// (Stats.Resumed*, prefix.Stats.Resumed*) so that re-hits do not flatter the hit rate.
	Resumed bool
}

// AdmitResult says what Admit did (or, from CanAdmit, would do).
type AdmitResult struct {
	// HitTokens is the length of the prefix hit (HitBlocks x BlockSize): KV already
	// computed that the caller must not compute again.
	HitTokens int
	// HitBlocks is the number of cached blocks the sequence shares.
	HitBlocks int
	// NewBlocks is the number of blocks allocated for the rest (prompt and lookahead).
	NewBlocks int
	// Tokens is the sequence's length after admission (the hit plus the prefill).
	Tokens int
	// LoadTokens is the part of the prompt after the device hit that lower tiers (an
	// index built prefix.WithTiers) hold: the Manager allocated its blocks and prepared
	// transfer Load, which TakePlans hands out. The caller computes neither the hit nor
	// these tokens, and runs the sequence once CompleteTransfer confirms the load; if the
	// load fails, it computes them after all (CompleteTransfer says so).
	LoadTokens int
	// Load names the load transfer, 0 when LoadTokens is 0.
	Load prefix.TransferID
	// Tiers is the hit per tier: the device prefix and the lower-tier blocks loaded.
	Tiers prefix.TierHit
}

// AppendResult says what Append did.
type AppendResult struct {
	// NewBlocks is the number of blocks allocated.
	NewBlocks int
	// Copied is true when the first write into a shared last block copied it: the server
	// must execute Copy before the step that writes the new tokens.
	Copied bool
	// Copy is the copy-on-write operation, valid when Copied.
	Copy CopyOp
	// Committed is the number of blocks that filled and were committed to the prefix index.
	Committed int
}

// PreemptRequest asks Preempt to free memory.
type PreemptRequest struct {
	// Need is the number of blocks that must become available (free or reclaimable).
	Need int
	// Mode is Recompute or Swap.
	Mode PreemptMode
	// Protect lists sequences that must not be chosen (typically the one trying to grow).
	Protect []SeqID
}

// Preempted reports one preempted sequence.
type Preempted struct {
	// Seq is the victim.
	Seq SeqID
	// Mode is how it was preempted.
	Mode PreemptMode
	// Tokens is the victim's length when preempted (what recompute mode will compute
	// again, minus any prefix hit at readmission).
	Tokens int
	// Freed is how many blocks became available (free or reclaimable) on the device at
	// once.
	Freed int
	// Awaiting is how many more become available once the victim's copies into the lower
	// tiers (Swap mode) are done: its demoted blocks, and the cached blocks above them that
	// they keep in the tree. They count as unavailable until then: until TakePlans hands
	// their plans out under TierConfig.StreamOrdered, until CompleteTransfer confirms
	// them otherwise. Freed + Awaiting is what the victim's release frees, the figure
	// Preempt counts against Need. 0 in Recompute mode. Blocks a load in flight into the
	// victim still holds are in neither: the load's completion returns them.
	Awaiting int
}

// SeqState is a sequence's lifecycle state.
type SeqState uint8

const (
	// Running sequences hold device blocks and can grow.
	Running SeqState = iota + 1
	// Swapped sequences hold no device block, only their tokens and a hold on their KV
	// in the lower tiers; Resume brings them back.
	Swapped
)

// SeqInfo describes one sequence, from Manager.Seq.
type SeqInfo struct {
	State SeqState
	// Tokens is the sequence's length.
	Tokens int
	// Reserved is the number of lookahead slots beyond Tokens that the last Append (or
	// Admit) reserved, all in blocks the sequence alone holds (0 after Truncate, or after a
	// Fork that shares the block holding position Tokens).
	Reserved int
	// Blocks is the length of its table (null entries of a sliding window included).
	Blocks int
	// HitTokens is the prefix hit at admission.
	HitTokens int
	// Committed is the number of its blocks on its path in the prefix index.
	Committed int
	// Priority and Arrival are what the preemption policy sees.
	Priority int
	Arrival  uint64
}

// Stats is a snapshot of the Manager's state and counters.
type Stats struct {
	// Running and Swapped count sequences.
	Running, Swapped int
	// Capacity is the pool's usable blocks; Free the blocks on its free list.
	Capacity, Free int
	// InUse counts blocks that are not free and not reclaimable: what running sequences
	// hold (vLLM's usage figure). Capacity = Free + InUse + Evictable. This differs from
	// blocks.Stats.InUse, the pool's count, which includes the evictable cached blocks:
	// here InUse = blocks.Stats.InUse - Evictable.
	InUse int
	// Cached counts blocks in the prefix index; Evictable those that repeated leaf
	// eviction can free now (the index's Reclaimable).
	Cached, Evictable int
	// HostInUse counts the lower-tier blocks held for swapped sequences
	// (prefix.Index.HeldBlocks of their holds).
	HostInUse int

	// Admitted, Finished, Aborted, Forks, Preemptions, SwapIns (Resume) count calls that
	// succeeded.
	Admitted, Finished, Aborted, Forks, Preemptions, SwapIns uint64
	// CopyOnWrites counts blocks copied on first write after a fork or truncation.
	CopyOnWrites uint64
	// PromptTokens sums the prompt lengths of admissions; HitTokens their prefix hits.
	// Resumed admissions (Request.Resumed) are not in them but in ResumedAdmitted,
	// ResumedPromptTokens and ResumedHitTokens (Admitted counts both).
	PromptTokens, HitTokens                                uint64
	ResumedAdmitted, ResumedPromptTokens, ResumedHitTokens uint64
	// Evictions counts cached blocks the pool reclaimed from the index for allocations.
	Evictions uint64
	// RejectedAdmissions counts Admit calls refused for lack of blocks.
	RejectedAdmissions uint64
	// LoadedTokens sums the LoadTokens of admissions (not resumed ones) whose load
	// completed ok; LoadFailedTokens those of failed loads, computed after all.
	LoadedTokens, LoadFailedTokens uint64
}

// TieredHitRate is (HitTokens + LoadedTokens) / PromptTokens: the hit rate counting
// prefixes found in lower tiers and loaded back.
func (s Stats) TieredHitRate() float64 {
	if s.PromptTokens == 0 {
		return 0
	}
	return float64(s.HitTokens+s.LoadedTokens) / float64(s.PromptTokens)
}

// HitRate is HitTokens / PromptTokens: the token-weighted prefix hit rate of admissions.
func (s Stats) HitRate() float64 {
	if s.PromptTokens == 0 {
		return 0
	}
	return float64(s.HitTokens) / float64(s.PromptTokens)
}
