// Package prefix is the prefix index of kvpage: a radix tree over full blocks of tokens
// that lets requests whose prompts begin alike share the KV blocks holding that beginning,
// so a thousand chats with one system prompt keep one copy of it.
//
// # Use
//
// A request calls Match to find the longest cached prefix of its prompt (no references
// taken, nothing touched), Acquire to take its own references on the matched blocks,
// allocates the rest from the pool, Commit to cache each block as it fills (during prefill
// and decode, so that concurrent requests can hit it before the first one finishes), and
// Release at the end. The index holds one pool reference on every cached block; a cached
// block that only the index holds is reclaimable, and the index is the pool's
// blocks.Reclaimer, so allocation under memory pressure evicts on demand.
//
// # Structure: one node per block
//
// Every cached block is one node, and the node of block b is simply slot b+1 of flat
// arrays: 40 bytes of metadata (chained key, last access, parent, child and pinned-child
// counts, generation, hits, flags) and the block's tokens in one token arena, indexed by
// block ID, with no pointer anywhere for the garbage collector to scan. Parent-to-child
// links live in one open-addressing table for the whole tree, keyed by each child's chained
// 64-bit hash and sized once for the pool's capacity, so it never grows or rehashes.
//
// Compressed runs (one node for a chain of blocks, split on divergence) save a table probe
// per block on a long unshared path, but the unit of sharing, eviction, reference counting
// and events is the block: with runs, evicting a leaf block splits a node, a hit in the
// middle of a run splits it, and every per-block fact (refcount, last access, hash) needs a
// side array anyway. With one node per block, every operation is O(blocks touched) and node
// metadata is indexed directly by block ID.
//
// What runs would save, a probe per block along a path, one node per block gets back with a
// hint: each node names one child to try first, the last child a request acquired (else the
// first committed). Along a path that requests share, the next block is that child, so
// Match confirms it with one 16-token comparison and no hash or table probe: about 4.5 ns
// a block, 1.2 us for W2's 256 blocks on the test machine (see bench/README.md). Only where the prompt leaves the
// hinted child for another does Match hash the block and probe the table; a node whose only
// child is the hint answers a miss without either. The hint costs 4 bytes a node and is
// only ever a shortcut: a child is accepted on its tokens, and multimodal children (whose
// extra keys a token comparison would skip) are never hints.
//
// Namespaces (LoRA adapter, cache salt) are separate subtrees under their own roots, not a
// filter after matching. A root lives only while its namespace has cached blocks, so a
// server that gives every user a cache salt does not keep a root per user forever: Commit
// creates a namespace's root, evicting its last block frees it, and Reset frees them all.
// Freed root slots (a node, a hint, the namespace's strings and its map entry) go on a
// free list that later namespaces reuse, so there are never more root slots than the peak
// number of live namespaces. Freeing a root bumps its generation, so a cursor at a freed
// root, or at one reused by another namespace, is stale like a cursor at an evicted block:
// Commit walks the prompt from its namespace's current root (creating it again for a cursor
// at the root) and never commits under whoever holds the slot now.
//
// Multimodal extra keys are stored for the blocks that carry any and take part in equality
// and in hashes. Equality is always decided on tokens and extra keys: a hash picks a table
// slot and labels a block in events, and colliding hashes only cost probes (tests force
// every key to collide).
//
// The table is shared by every namespace, so its keys are seeded: the fast scheme with
// secret constants drawn per index (WithSeed fixes them). With public constants a tenant
// could craft blocks whose keys all collide and make every other tenant's lookups probe
// through them (26x to 54x slower in issue 13's measurements); seeded, crafted blocks cost
// others what as many ordinary blocks would (TestSeededKeysBoundAFloodersCostToOthers,
// BenchmarkFlood). The seed decides where a block sits in the table and nothing else:
// hits, evictions, events, hashes and dumps are identical under every seed, so runs stay
// deterministic without fixing it.
//
// # Hashes and events
//
// Each cached block has a chained hash for events: by default Fast64 (64-bit,
// non-cryptographic, the same everywhere, so a router can recompute it), computed and
// stored at Commit only when an Observer is set (Hash recomputes it otherwise, so the
// default costs no extra memory); SHA256 or any Hasher (prefix/vllmhash has vLLM's
// sha256_cbor) are computed at Commit and stored beside the tree. A Hasher sees the parent hash, the tokens and the Extra keys in vLLM's
// order (LoRA name, multimodal hashes, cache salt on a namespace's first block only). An
// Observer receives BlockStored (one event per Commit that stores, the new blocks as one
// chain), BlockRemoved (one per eviction batch) and AllBlocksCleared (Reset), synchronously
// and in order; with no Observer nothing is computed for events.
//
// # Eviction
//
// Only unreferenced leaves are evictable, so every cached path stays a valid prefix. The
// evictable set is kept incrementally: a leaf enters it when its last request reference
// goes, and a parent enters it when its last child is evicted, with its own older last
// access (not the time it became a leaf). The default order is LRU by last use on a logical
// clock, ties by block ID: every Acquire and Commit touches the blocks involved (one tick
// per call), Release touches them from last to first (one tick each, so a request's tail is
// older than its head, as vLLM frees in reverse), and Match touches nothing. The default
// policy is evict.NewLRU over block IDs; WithPolicy plugs in any other evict.Factory. The pool's free list
// is always used before anything is evicted.
//
// Reclaimable is exact: it is the number of cached blocks no request holds and that lie
// above no held block, kept as a count of "pinned" blocks (held, or with a pinned child)
// updated when a block's pin state changes, which costs O(1) amortized per block along a
// request's path.
//
// # Duplicates
//
// When Commit is given a block whose tokens (and extra keys) are already cached under the
// same parent as another block, the index keeps its existing copy and touches it; the
// caller's block is left alone: not cached, still held by the caller, valid in its table,
// and back to the pool when the caller releases it. The cursor moves onto the existing copy
// so later blocks chain under it. The caller does not hold that copy, so it may be evicted
// before the caller's next Commit; the cursor notices (a generation per node), walks the
// prompt from the root to find the path again, and if it is gone leaves the rest of the
// sequence's blocks uncached (CommitResult.Orphaned). No table ever points at a freed block.
// A live cursor used with another namespace's prompt fails with ErrInvalidCursor; a stale
// one cannot be told apart from its namespace's own (its root may be gone) and is walked
// under the prompt's namespace, which is where its blocks belong.
//
// # Errors
//
// Bad input returns an error wrapping a sentinel (ErrLengthMismatch, ErrNotHeld,
// ErrNotCached, ErrNotAcquired, ErrAlreadyCached, ErrBlocksHeld, ErrEmptyNamespace,
// ErrInvalidCursor), to test with errors.Is, and leaves the index and the pool exactly as
// they were. The index panics only for a broken invariant.
//
// # Invariants
//
// Every cached block holds the index's pool reference, and more than one exactly when a
// request holds it; parent and child links agree and every cached block is found under its
// parent in the child table with its own tokens; keys are the chained hashes of the tokens;
// a block is pinned exactly when a request holds it or a child is pinned; the evictable set
// is exactly the unpinned leaves; a node's hint is one of its cached text-only children or
// none; every live namespace root is its namespace's map entry and has a child, every free root slot is blank, on the free list once and in no
// map entry, and live roots plus free slots are all the slots; cached = inserts -
// evictions - dropped. CheckInvariants
// verifies all of them; under the kvinvariants build tag (and -race) every mutation
// re-checks them, sampled with invariant.Sample.
//
// # Concurrency
//
// An Index is not safe for concurrent use. One scheduler goroutine owns it together with
// its pool, as in vLLM, SGLang and TensorRT-LLM; observers are called on that goroutine and
// must not call back into the index.
//
// # Cost
//
// Match, Acquire, Release, Commit and Reclaim are O(blocks touched) (Reclaim adds
// O(log evictable) per victim) and allocate nothing in steady state. Memory is fixed at New:
// per pool block, 40 bytes of node, 4 bytes of hint, 4 bytes per token, 12 bytes of LRU heap
// and position, and 8 bytes of child table; per live namespace (at the peak), a root
// slot of 44 bytes, its rootInfo and its map entry.
package prefix
