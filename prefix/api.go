package prefix

// This file holds the index's public types: namespaces, prompts, retention, hashers,
// events, options and cursors.

import (
	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
)

// Namespace separates requests that must never share KV blocks: different LoRA adapters,
// and different cache salts (vLLM's cache_salt, which is how tenants are kept apart). The
// zero value is the default namespace. Each namespace is its own subtree of the index.
type Namespace struct {
	// LoRA is the adapter's name; "" for the base model.
	LoRA string
	// Salt is the cache salt; "" for none.
	Salt string
}

// MMInput marks a multimodal input (an image, an audio clip) whose placeholder tokens occupy
// Tokens[Offset : Offset+Length] of a prompt. Every block that overlaps it carries Hash as
// an extra key, so identical placeholder tokens from different inputs never match.
type MMInput struct {
	Hash   string
	Offset int
	Length int
}

// Prompt is what the index matches and stores: tokens in a namespace, with the multimodal
// inputs they contain (sorted by Offset; nil for text), and how long Commit should try to
// keep its blocks.
type Prompt struct {
	Namespace Namespace
	Tokens    []int32
	MM        []MMInput
	// Retention is given to every block Commit caches or finds cached for this prompt. The
	// zero value asks for nothing: new blocks get the default priority and blocks already
	// cached keep theirs.
	Retention Retention
	// RetentionRanges gives token ranges of the prompt their own retention (see
	// RetentionRange); nil gives every block Retention. At most MaxRetentionRanges,
	// none overlapping.
	RetentionRanges []RetentionRange
}

// Retention is a retention priority with an optional time limit, as TensorRT-LLM's
// KvCacheRetentionConfig gives it: the eviction policy sees it in evict.Entry (Priority,
// PriorityUntil). Only a policy that reads it ("priority") changes order by it; the
// default LRU ignores it.
type Retention struct {
	// Priority is 1 (evicted first) to 100 (kept longest, evict.MaxPriority); 0 means
	// evict.DefaultPriority. 101-255 is refused with ErrInvalidArgument, changing nothing
	// (Validate): by Index.Commit (in Retention or in a RetentionRange), SetRetention and
	// HoldSession, and by blocktable.Manager's Admit, CanAdmit and FinishTurn.
	Priority uint8
	// Until is the logical time (the index's clock) after which Priority lapses to the
	// default; 0 means never.
	Until uint64
}

// Extra is a block's identity beyond its tokens, in vLLM's order: the LoRA name, the
// multimodal inputs that overlap the block, and the cache salt on a namespace's first
// block only. It takes part in equality and in the block hash.
//
// A multimodal input is keyed by its identifier MM[i] alone (MMKeyIdentifier: MMOffsets
// is nil), or by the pair (MM[i], MMOffsets[i]) (MMKeyIdentifierOffset: MMOffsets has
// one entry per MM entry), the offset being where the input starts relative to the
// block's first token.
type Extra struct {
	LoRA      string
	MM        []string
	MMOffsets []int
	Salt      string
}

// Hasher computes chained block hashes. Hashes identify blocks in events and logs; the
// index never takes a hash as proof of equality (it compares tokens and extras).
type Hasher interface {
	// Name identifies the scheme ("xxh64"-like default, "sha256", "sha256_cbor", ...).
	Name() string
	// Size is the length in bytes of every hash it writes.
	Size() int
	// Root writes into dst (len Size()) the parent hash of a namespace's first block
	// (vLLM: the hash of the seed, NONE_HASH).
	Root(dst []byte)
	// Block writes into dst (len Size()) the hash of a block from its parent's hash, its
	// tokens (exactly one block) and its extra keys. It must not retain any argument.
	Block(dst, parent []byte, tokens []int32, extra Extra)
}

// BlockStored reports blocks newly cached as one chain: block i has hash Hash(i), its
// parent is block i-1, and block 0's parent is Parent (nil when block 0 is the first block
// of its namespace). Slices are valid only during the call: an observer that keeps them
// copies them.
type BlockStored struct {
	Hashes    []byte // len(Blocks) hashes of HashSize bytes each, concatenated
	HashSize  int
	Parent    []byte
	Blocks    []blocks.ID
	Tokens    []int32 // len(Blocks) x BlockSize tokens
	BlockSize int
	Namespace Namespace
	// MM holds each block's multimodal extra keys, or is nil when no block has any.
	MM [][]string
	// MMOffsets holds, in the (identifier, offset) form (MMKeyIdentifierOffset), the
	// offset of each of MM's keys (MMOffsets[i][j] goes with MM[i][j]); it is nil in the
	// identifier form and when MM is nil.
	MMOffsets [][]int
	// Medium is the tier that now holds the blocks, as vLLM's medium field names it: ""
	// for the device (a publisher's configured medium, MediumGPU by default), or a lower
	// tier's TierSpec.Medium, in which case Blocks are that tier's slots. A block that
	// moves is reported once per tier it enters, never again for a tier it stays in.
	Medium string
	// Group is the KV-cache group the blocks belong to (vLLM's group_idx), when HasGroup:
	// a GroupTree's events always say it, an Index's never (it is one group).
	Group    int
	HasGroup bool
}

// Hash returns the hash of the i-th stored block.
func (e *BlockStored) Hash(i int) []byte { return e.Hashes[i*e.HashSize : (i+1)*e.HashSize] }

// BlockRemoved reports cached blocks that left the index (evicted, or dropped by Reset or
// EvictBlocks).
type BlockRemoved struct {
	Hashes   []byte
	HashSize int
	Blocks   []blocks.ID
	// Medium is the tier the blocks left, as in BlockStored.
	Medium string
	// Group and HasGroup are as in BlockStored.
	Group    int
	HasGroup bool
}

// Hash returns the hash of the i-th removed block.
func (e *BlockRemoved) Hash(i int) []byte { return e.Hashes[i*e.HashSize : (i+1)*e.HashSize] }

// Observer receives the index's events, in order, synchronously. It must not call back
// into the index. Nothing is computed for events when no observer is set.
type Observer interface {
	BlockStored(e *BlockStored)
	BlockRemoved(e *BlockRemoved)
	AllBlocksCleared()
}

// Option configures an Index.
type Option func(*config)

type config struct {
	blockSize int
	policy    evict.Factory
	hasher    Hasher
	observer  Observer
	clock     evict.Clock
	// requireNS rejects the zero Namespace (WithNamespaceRequired).
	requireNS bool
	// keyMask is ANDed into every table key; tests set it to force hash collisions.
	keyMask uint64
	// seed of the table keys (WithSeed); drawn at random unless seeded. unseeded (tests)
	// uses Fast64's published constants, the table before keys were seeded.
	seed     uint64
	seeded   bool
	unseeded bool
	// history is the number of evictions Explain remembers (WithEvictionHistory).
	history int
	// pinBudget is the most blocks Pin may hold (WithPinBudget).
	pinBudget int
	// quotas enables SetQuota (WithQuotas).
	quotas bool
	// mmForm is how multimodal inputs key blocks (WithMMKeyForm).
	mmForm MMKeyForm
	// tiers configures the lower tiers (WithTiers); nil for none.
	tiers *TierConfig
}

// WithPolicy sets the eviction policy: New calls f with the pool's NumBlocks (keys are
// block IDs) and the index's clock. The default is evict.NewLRU; any Factory of
// evict.ByName, or a caller's own, plugs in the same way.
func WithPolicy(f evict.Factory) Option { return func(c *config) { c.policy = f } }

// WithHasher sets the block hasher (default: the fast 64-bit hasher).
func WithHasher(h Hasher) Option { return func(c *config) { c.hasher = h } }

// WithObserver sets the event observer (default: none, and no event costs anything).
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

// WithClock shares a logical clock with the index (default: a private evict.Counter).
// The manager and the index share one so that they agree on what recent means.
func WithClock(c evict.Clock) Option { return func(cf *config) { cf.clock = c } }

// Cursor remembers where in the tree a sequence's committed blocks end, so that committing
// one more block as it fills costs O(1) instead of a walk from the root. Peek
// returns one at the end of the hit, and Commit advances it. The zero Cursor stands at the
// root of the prompt's namespace, whether or not that namespace has anything cached yet: a
// sequence that matched nothing commits with it, and its first block creates the root. A
// cursor whose node has left the tree since (an evicted block, or a namespace root freed
// with its last block) is stale, and Commit finds its place again by walking the prompt
// from the namespace's current root.
type Cursor struct {
	node   int32  // internal node index; 0 means not positioned, -1 detached
	blocks int32  // how many blocks of the sequence lie on the path to node
	gen    uint64 // node's generation when the cursor was placed: detects a node that left the tree
	root   int32  // root node of the cursor's namespace (0 when node is 0)
}

// Blocks is how many of the sequence's blocks the cursor has passed.
func (c Cursor) Blocks() int { return int(c.blocks) }

// CommitResult says what Commit did with each block it was given.
type CommitResult struct {
	// Stored counts blocks newly cached (the index took a reference on each).
	Stored int
	// Duplicates counts blocks whose tokens were already cached under the same parent as
	// another block. The index keeps its existing copy; the caller's block stays the
	// caller's, uncached, valid for its table, and returns to the pool when the caller
	// releases it. The cursor moves onto the existing copy so later blocks chain under it.
	Duplicates int
	// Present counts blocks that were already cached at this very place (the caller
	// committed them before): nothing changes for them but their last access.
	Present int
	// Orphaned counts blocks left uncached because the cached prefix they extend was
	// evicted in the meantime (possible only after a duplicate, whose existing copy the
	// caller does not hold). They stay the caller's, like duplicates, and so do all later
	// blocks of the sequence: the cursor is detached.
	Orphaned int
}
