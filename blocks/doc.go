// Package blocks is the physical layer of kvpage: a fixed-capacity pool of KV-cache blocks
// identified by small integers, with reference counts, a FIFO free list, statistics and
// invariant checks. It knows nothing of tokens.
//
// # Semantics
//
// A block is free (no holder, on the free list) or held (one or more holders). Allocate
// hands out free blocks with one holder each; Retain adds a holder (a fork, a prefix hit,
// the cache keeping a block); Release drops one, and a block whose last holder leaves goes
// back to the tail of the free list at that moment. IDs come out in ascending order from a
// new pool, then released blocks are reused in the order their last holder left, so tests
// can assert exact IDs.
//
// With WithNullBlock, block 0 is reserved as vLLM reserves it for padding and for table
// slots outside a sliding window: never handed out, never freed, not counted in usage.
//
// When the free list cannot cover an allocation, the pool asks its Reclaimer (the prefix
// index, which evicts unreferenced cached blocks). The Reclaimer first says how many blocks
// it can certainly free; only if free + that number covers the request does anything
// change, so an allocation never evicts and then fails. A Reclaimer that then frees fewer
// blocks than it reported breaks that contract, and the pool panics.
//
// Stats reports two usage figures: Usage counts cached blocks as used (how full memory
// is), ActiveUsage leaves out the reclaimable ones (what running requests need). vLLM
// reports the second, which falls to 0% while its prefix cache is still warm.
//
// # Errors
//
// Bad input returns an error wrapping one of the sentinel errors (ErrOutOfBlocks,
// ErrDoubleFree, ErrNotAllocated, ErrUnknownBlock, ErrNullBlock, ErrInvalidArgument), to be
// tested with errors.Is, and leaves the pool exactly as it was: every call is all or
// nothing (a failed allocation only counts itself in Stats.FailedAllocations). The typed
// errors carry the details for errors.As: *OutOfBlocksError the blocks requested and
// available, *BlockError the operation and the offending block, *CountError a negative
// count. The pool panics only for a broken invariant, which is a bug in this module.
//
// # Invariants
//
// Every usable block is free or held, never both; the free list holds each free block
// exactly once; free + in use = capacity; no refcount is negative; the null block is never
// free or held. CheckInvariants verifies all of them in O(capacity); under the kvinvariants
// build tag (and under -race) the first 1,024 mutations of a pool re-check them, then one
// mutation in 64, so that large pools stay testable.
//
// # Concurrency
//
// A Pool is not safe for concurrent use. One scheduler goroutine owns it, as in vLLM,
// SGLang and TensorRT-LLM, which keeps the hot paths free of locks and atomics.
//
// # Cost
//
// Per-block metadata is 8 bytes in two flat slices (an int32 refcount and an int32
// free-ring slot), with no pointer per block for the garbage collector to scan:
// BenchmarkPoolMemory measures 8 bytes per block on a 1M-block pool. Allocate copies IDs
// out of the ring and Release writes them back in one pass; neither allocates memory when
// the caller's slice has room, and W1 (allocate 256, free 256) costs a few nanoseconds per
// block. bench/README.md has the figures and the commands that produced them.
//
// # vLLM's free queue
//
// FreeQueue is the other model of a free list, the one vLLM's hybrid allocator needs:
// refcounts and one queue of every unreferenced block, cached ones included, in the order
// they were freed, a hit taking a block back out from the middle, allocation popping the
// front (whose owner evicts it if it is cached). It knows no cache and no tokens; its
// owner (blocktable/hybrid, over a prefix.GroupTree) decides what a popped block held.
//
// # Extending it
//
// The pool knows no tokens: what fills blocks (the prefix index, a tier of host memory)
// plugs in above it, as a holder of references or as the pool's one Reclaimer
// (SetReclaimer). KV sizing (bytes per token and block, model and GPU presets, planning)
// lives in the sibling package blocks/sizing, which imports nothing of the pool.
package blocks
