// Package prefix is the prefix index of kvpage: a radix tree over full blocks of tokens
// that lets requests whose prompts begin alike share the KV blocks holding that beginning,
// so a thousand chats with one system prompt keep one copy of it.
//
// # Use
//
// A request calls Peek to find the longest cached prefix of its prompt (no references
// taken, nothing touched or counted), RecordLookup once it is admitted (the hit rate of
// Stats), Acquire to take its own references on the matched blocks, allocates the rest
// from the pool, Commit to cache each block as it fills (so that
// concurrent requests can hit it before the first one finishes), and Release at the end.
// A request that matched nothing commits with the zero Cursor. The index holds one pool
// reference on every cached block and is the pool's reclaimer: an allocation that finds the
// free list empty evicts unreferenced leaves, least recently used first by default, so every
// cached path stays a valid prefix. Namespace (LoRA adapter, cache salt) separates requests
// that must never share blocks; Prompt.Retention asks the eviction policy to keep a
// prompt's blocks longer. See the Example.
//
// # Retention and explanations
//
// Prompt.RetentionRanges give token ranges their own priority and duration (TensorRT-LLM's
// shape, on the logical clock); HoldSession keeps a session's context through a pause;
// Pin holds blocks within WithPinBudget, saying what it refused; SetQuota (WithQuotas)
// caps a namespace, evicting its own blocks first; SaltRegion shares a public prefix and
// keeps the rest per tenant; BumpEpoch makes a namespace's blocks unreachable at once,
// evicted lazily; EvictBlocks drops given blocks and every block below them (vLLM's
// evict_blocks), for a step whose KV failed after its commits. Explain says, as a
// MissReason, where and why a lookup stopped (WithEvictionHistory tells evicted from
// never stored). QueueOrder and BatchSharing
// order and group waiting requests by what is cached, changing nothing.
//
// # Lower tiers
//
// WithTiers adds host memory, disk or a user's own tier below the device, each with its
// capacity in blocks, its eviction policy from evict, and a write policy (write-back at
// eviction, write-through at commit, or after N hits). An evicted block then stays
// findable: PeekLower continues Peek's match into the tiers (device prefix, then host,
// then disk) and PrepareLoad reserves its promotion into device blocks the caller holds.
// kvpage moves no bytes: TakePlans returns transfer plans (runs of contiguous blocks,
// with byte sizes) that the server executes, and CompleteTransfer confirms each, ok or
// failed. A device block being demoted is unavailable until its copy is confirmed, and
// demotion starts below a watermark of free blocks so that no allocation waits on a copy.
// Events name each tier's medium (vLLM's GPU, CPU, DISK), one event per chain of blocks a
// transfer moves; Reset and BumpEpoch cover every tier. Multimodal blocks are tiered as
// any other, verified by the hash of their extra keys. Hold keeps a prefix's lower-tier
// copies from eviction (a swapped-out sequence's KV) until ReleaseHold, and refuses
// (ErrTierFull) what tier 1 cannot take. Under TierConfig.StreamOrdered a store's device
// block is reusable once its plan is handed out. The Manager of package blocktable drives
// all of it from admission and Swap preemption.
//
// # Hybrid models
//
// GroupTree is the index of a model with several KV-cache groups (full attention,
// sliding window, Mamba state): one tree of logical prefixes, each node holding per group
// the blocks cached for it, so that a group can lose a block mid-chain (a window block
// evicted) while the prefix stays reachable for the others. Its entries carry a residency
// Tier: with SetTiers (the TierConfig WithTiers takes) a host, disk or user tier holds
// copies per (node, group), a node stays while any tier holds an entry, and the same
// Plans, TransferIDs and TransferResults move them (PrepareStore, PrepareLoad, TakePlans,
// CompleteTransfer; LowerTier reads where a lookup continues). It holds no references
// and no free list: blocktable/hybrid composes it with blocks.FreeQueue, vLLM's free
// queue, holds the device blocks copies read or fill, and drives it. Index and GroupTree
// are separate types; an Index is one group.
//
// # Contract
//
// An Index is not safe for concurrent use: one scheduler goroutine owns it with its pool,
// as in vLLM, SGLang and TensorRT-LLM; observers are called on that goroutine, in order,
// and must not call back. Bad input returns an error wrapping a sentinel of errors.go (test
// with errors.Is) and leaves the index and the pool exactly as they were; the index panics
// only for a broken invariant (CheckInvariants lists them; -tags kvinvariants and -race
// check them after every mutation). Peek, Acquire, Release, Commit and Evict are
// O(blocks touched), Evict adds O(log evictable) per victim, and none allocates in steady
// state. Memory is fixed at New: about 156 bytes per pool block at 16 tokens a block (a
// 128-byte node, 64 of them the tokens, and the child table); blocks of more than 16 tokens
// keep their tokens beside the nodes, 4 bytes a token.
//
// # Extending it
//
// A new eviction policy goes in package evict (see its doc) and plugs in with WithPolicy;
// the index gives it block IDs as dense keys. A new block hash goes in its own package as a
// Hasher (prefix/vllmhash holds vLLM's) and plugs in with WithHasher. Events go to an
// Observer (WithObserver); their wire formats and transports live in prefix/kvevents and
// its subpackages, never here, so that embedding the index pulls in no codec or network
// client.
package prefix
