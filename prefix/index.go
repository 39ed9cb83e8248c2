package prefix

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/internal/evictfast"
	"github.com/kvpage/kvpage/internal/poolrefs"
)

// How the index is laid out (for maintainers; users read the package doc).
//
// Every cached block is one node, and the node of block b is simply slot b+1 of flat
// array: one 64-byte cache line of metadata (chained key, last access, parent, child and
// pinned-child counts, generation, hits, hint child, flags) followed by a line of the
// block's tokens when they fit in it (16 or fewer; else they lie in one token arena,
// indexed by block ID), with no pointer anywhere for the garbage collector to scan. Parent-to-child
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
// Peek confirms it with one 16-token comparison and no hash or table probe: about 4.5 ns
// a block, 1.2 us for W2's 256 blocks on the test machine (see bench/README.md). Only where the prompt leaves the
// hinted child for another does Peek hash the block and probe the table; a node whose only
// child is the hint answers a miss without either. The hint costs 4 bytes a node; a child is
// accepted on its tokens, and multimodal children (whose extra keys a token comparison
// would skip) are never hints. The hint child is also the one child of its parent that the
// child table does not hold: every lookup tries it first, so the table need not, and a
// chain of new blocks (each the first child of the last: every commit that shares
// nothing) is inserted and evicted without touching a table line. A hint that moves (an
// acquire reusing another child) swaps the two in and out of the table.
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

// Index is the radix-tree prefix index. See the package documentation.
type Index struct {
	cfg   config
	pool  *blocks.Pool
	refs  []int32 // the pool's holder counts (internal/poolrefs), for the trusted paths
	bs    int     // tokens per block
	nb    int     // pool.NumBlocks(): block b is node b+1, namespace roots follow
	clock evict.Clock
	ctr   *evict.Counter // clock when it is the default Counter: ticks without an interface call
	obs   Observer

	// nodes: node 0 unused; 1..nb blocks; nb+1.. namespace roots. A node's hint is the
	// child Peek tries first (0 = none): a text-only child, the last one a request
	// acquired, else the first one committed while the node had no hint (none yet, or the
	// hint was evicted). Along a path that requests share, the next block is almost
	// always this child, so Peek confirms it by comparing tokens and skips the hash and
	// the table probe. See match.go. The table holds every cached block but the hints
	// (findChild tries the hint first).
	nodes []node
	// tokens holds the tokens of blocks longer than a node's tok (bs > 16), bs per block,
	// indexed by block ID; nil when they fit in the node (inline).
	tokens []int32
	inline bool // bs <= 16: block node n's tokens are nodes[n].tok[:bs]
	table  childTable
	mm     map[int32][]mmKey // multimodal extra keys of the blocks that have any

	// Namespaces. A root lives while its namespace has cached blocks (see freeRoot), so
	// root slots nb+1.. are reused: freeRoots lists the free ones, and there are never
	// more slots than the peak number of live namespaces.
	roots     map[Namespace]int32
	rootInfo  []rootInfo // indexed by node - nb - 1; zero for a free slot
	defRoot   int32      // root of the zero Namespace, 0 while it has none
	freeRoots []int32    // free root slots, reused last freed first

	// Eviction order over the unreferenced leaves, keyed by block ID (WithPolicy; evict.NewLRU
	// by default).
	policy evict.Policy
	// chain is policy's fast path for evicting a chain and adding a candidate
	// (internal/evictfast), nil unless policy is exactly evict.NewLRU's (not a policy
	// embedding it, not the LRU wrapped for quotas).
	chain evictfast.Chain
	// until is, per block node, the logical time after which its retention priority lapses (0 =
	// never); nil until a Commit asks for a time limit, so that it costs nothing otherwise.
	until []uint64

	// sec is the secret of the table keys (WithSeed); fastSecret when unseeded.
	sec secret
	// Hashes reported in events. Stored (hashSize bytes per block, indexed by block ID)
	// unless they are the table keys (fast: Fast64 with unseeded keys) or nothing needs
	// them at commit time (Fast64, no observer: Hash recomputes them, see fast64Of).
	hasher   Hasher
	fast     bool
	hashSize int
	hashes   []byte
	rootHash []byte

	cached    int // cached blocks
	pinned    int // cached blocks held by a request or lying under one that is
	stats     counters
	mutations uint64
	gens      uint64  // the last incarnation number given to a node (newGen)
	ctl       control // eviction history, retention state: see control.go
	// tiers holds the lower tiers' books (tierstore.go); nil without WithTiers, and then
	// every hook into the tree's paths is one nil check.
	tiers *tierStore

	// Scratch buffers, reused so that steady-state calls allocate nothing.
	keyBuf   []uint64
	nodeBuf  []int32
	idBuf    []blocks.ID
	relBuf   []blocks.ID // releaseUncached's
	hashBuf  []byte
	mmBuf    []mmKey
	pathBuf  []int32  // fast64Of's path
	mmIDs    []string // Extra.MM of extraOf
	mmOffs   []int    // Extra.MMOffsets of extraOf
	mmFlat   []string
	mmLists  [][]string
	offFlat  []int
	offLists [][]int
	// Events handed to the observer, reused.
	evStored  BlockStored
	evRemoved BlockRemoved
}

// node is one cached block (or a namespace root): 128 bytes, two cache lines, the first
// with everything the index keeps of a block but its tokens, its child-table slot and the
// rarely set time limit (Index.until), the second with its tokens when a block holds at
// most 16 (tok; Index.tokens otherwise). Index.nodes is 128-byte aligned (a size class of
// Go's allocator, or a page-aligned large allocation), so each node is one aligned pair of
// lines, which the L2's spatial prefetcher fetches together: a commit reads the new
// block's first line (its generation) and writes its tokens on the second, and a hint
// check compares a child's tokens and then reads its hint, each pair one miss where two
// separate arrays made it two (BenchmarkNodeTokensPaired; the sharing simulator run is
// the figure, see bench/README). A path's blocks have unrelated IDs, so no two of a
// commit's or a match's blocks ever shared a line anyway; a node has 22 bytes to spare.
//
// gen is a block node's incarnation, for cursors: Commit gives it a new number (newGen)
// when it caches a block there (an evicted node has no flagCached, which already makes a
// cursor at it stale; the next incarnation's gen makes it stale for good), and so does a
// root slot's freeing (freeRoot). The numbers come from one counter of the index's, not
// from the node's own gen plus one, so that a commit writes the new block's node without
// reading it: that pair of lines was last touched when the block was evicted, many steps
// before, and a write alone lets the core run on while the lines come (a decode step's
// commit reads only its cursor's node and the pool's count of the block's holders, see
// leafToExtend). 64 bits never wrap. hits counts a block's uses: 1 at commit, one per acquire and per
// duplicate commit. hint is the child Peek tries first (see Index.nodes).
type node struct {
	key        uint64 // chained fast64 hash: table key and, by default, the event hash
	lastAccess uint64 // logical time of the last acquire, commit or release
	gen        uint64 // this incarnation's number, from Index.gens (see below)
	parent     int32
	children   int32
	pinnedKids int32 // children that are pinned
	hits       uint32
	hint       int32
	flags      uint8
	prio       uint8 // retention priority (Prompt.Retention); 0 = evict.DefaultPriority
	_          [18]byte
	tok        [16]int32 // the block's tokens when Index.inline
}

const (
	flagCached uint8 = 1 << iota // a block node in the tree
	flagPinned                   // held by a request, or has a pinned child
	flagMM                       // has multimodal extra keys in Index.mm
	flagRoot                     // a namespace root
	flagMark                     // scratch mark during one call
)

// detached is the node of a cursor whose path was evicted under it.
const detached = -1

type rootInfo struct {
	ns    Namespace
	lora  uint64 // hashString(ns.LoRA)
	salt  uint64 // hashString(ns.Salt)
	hasLo bool
	hasSa bool
	// epoch is the namespace's weight epoch when the root was made (epoch.go), folded
	// into salt; retired marks a root BumpEpoch took out of the map (and, once its last
	// block goes, a tombstone slot that is never reused).
	epoch   uint32
	retired bool
}

// New builds an index over pool for blocks of blockSize tokens and plugs itself in as the
// pool's Reclaimer. It fails with ErrInvalidArgument for a nil pool or a pool that already
// has a Reclaimer (another index), and with a *SizeError (ErrInvalidArgument) for a block
// size outside [1, MaxBlockSize] or a token arena (the pool's blocks x blockSize) over
// MaxArenaTokens, before allocating anything.
func New(pool *blocks.Pool, blockSize int, opts ...Option) (*Index, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrInvalidArgument)
	}
	if blockSize <= 0 || blockSize > MaxBlockSize {
		return nil, &SizeError{What: "block size", N: int64(blockSize), Max: MaxBlockSize}
	}
	// The token arena holds every block's tokens: bound it before sizing anything by it.
	// blockSize <= 2^16 and NumBlocks < 2^31, so the product cannot overflow an int64.
	if arena := int64(pool.NumBlocks()) * int64(blockSize); arena > MaxArenaTokens {
		return nil, &SizeError{What: "token arena (blocks x block size)", N: arena, Max: MaxArenaTokens}
	}
	cfg := config{blockSize: blockSize, keyMask: ^uint64(0)}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.mmForm > MMKeyIdentifierOffset {
		return nil, fmt.Errorf("%w: multimodal key form %v", ErrInvalidArgument, cfg.mmForm)
	}
	if cfg.history < 0 || cfg.history > MaxEvictionHistory {
		return nil, &SizeError{What: "eviction history", N: int64(cfg.history), Max: MaxEvictionHistory}
	}
	nb := pool.NumBlocks()
	x := &Index{
		cfg:    cfg,
		pool:   pool,
		refs:   poolrefs.Of(pool),
		bs:     blockSize,
		nb:     nb,
		clock:  cfg.clock,
		obs:    cfg.observer,
		nodes:  make([]node, nb+1, nb+2),
		mm:     make(map[int32][]mmKey),
		roots:  make(map[Namespace]int32),
		hasher: cfg.hasher,
	}
	if blockSize <= len(node{}.tok) {
		x.inline = true
	} else {
		x.tokens = make([]int32, nb*blockSize)
	}
	if x.clock == nil {
		x.clock = &evict.Counter{}
	}
	x.ctr, _ = x.clock.(*evict.Counter)
	var err error
	if cfg.policy == nil {
		x.policy, err = evict.NewLRU(nb)
	} else {
		x.policy, err = cfg.policy(nb, x.clock)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: eviction policy: %w", ErrInvalidArgument, err)
	}
	if x.policy == nil {
		return nil, fmt.Errorf("%w: the eviction policy factory returned nil", ErrInvalidArgument)
	}
	if x.hasher == nil {
		x.hasher = Fast64{}
	}
	x.sec = fastSecret
	if !cfg.unseeded {
		seed := cfg.seed
		if !cfg.seeded {
			seed = randomSeed()
		}
		x.sec = secretFrom(seed)
	}
	_, fast64 := x.hasher.(Fast64)
	if fast64 && cfg.keyMask == ^uint64(0) && cfg.unseeded {
		x.fast = true // the table keys are the event hashes: nothing more to store
	}
	x.hashSize = x.hasher.Size()
	if x.hashSize <= 0 {
		return nil, fmt.Errorf("%w: hasher %q has size %d", ErrInvalidArgument, x.hasher.Name(), x.hashSize)
	}
	x.rootHash = make([]byte, x.hashSize)
	x.hasher.Root(x.rootHash)
	// Event hashes are stored when they differ from the table keys and something needs
	// them at commit time: an observer, or a hasher too slow to recompute on demand. The
	// default (Fast64, seeded keys, no observer) stores none, and Hash recomputes them.
	if !x.fast && (x.obs != nil || !fast64 || cfg.history > 0) {
		x.hashes = make([]byte, nb*x.hashSize)
	}
	x.table.init(pool.Capacity())
	x.ctl.init(&cfg)
	if cfg.quotas {
		x.initQuotas(cfg.policy)
	}
	x.chain = evictfast.Of(x.policy)
	if cfg.tiers != nil {
		if err := x.initTiers(cfg.tiers); err != nil {
			return nil, err
		}
	}
	if err := pool.SetReclaimer(reclaimer{x}); err != nil {
		return nil, fmt.Errorf("%w: %w (one index per pool)", ErrInvalidArgument, err)
	}
	return x, nil
}

// Pool is the pool the index caches blocks of.
func (x *Index) Pool() *blocks.Pool { return x.pool }

// Clock is the index's logical clock (the one passed WithClock, or its private counter).
func (x *Index) Clock() evict.Clock { return x.clock }

// WithNamespaceRequired makes the zero Namespace an error: Commit fails with
// ErrEmptyNamespace and Peek finds nothing. A multi-tenant server sets it so that a
// request without a tenant's salt can never share another's blocks.
func WithNamespaceRequired() Option { return func(c *config) { c.requireNS = true } }

// BlockSize is the number of tokens per block.
func (x *Index) BlockSize() int { return x.bs }

// Hasher is the hasher whose hashes events carry.
func (x *Index) Hasher() Hasher { return x.hasher }

// tick advances the logical clock.
func (x *Index) tick() uint64 {
	if x.ctr != nil {
		return x.ctr.Tick()
	}
	return x.clock.Tick()
}

// nodeOf is the node of block id.
func nodeOf(id blocks.ID) int32 { return int32(id) + 1 }

// blockOf is the block of node n (n a block node).
func blockOf(n int32) blocks.ID { return blocks.ID(n - 1) }

// isBlock reports whether node n is a block node (not a root, not 0).
func (x *Index) isBlock(n int32) bool { return n > 0 && int(n) <= x.nb }

// IsCached reports whether id is a block of the index.
func (x *Index) IsCached(id blocks.ID) bool {
	return id >= 0 && int(id) < x.nb && x.nodes[id+1].flags&flagCached != 0
}

// Hash appends to dst the hash that events carry for cached block id, and reports whether
// id is cached.
func (x *Index) Hash(dst []byte, id blocks.ID) ([]byte, bool) {
	if !x.IsCached(id) {
		return dst, false
	}
	return x.appendHash(dst, nodeOf(id)), true
}

// appendHash appends the event hash of block node n (or the root hash for a root).
func (x *Index) appendHash(dst []byte, n int32) []byte {
	if !x.isBlock(n) {
		return append(dst, x.rootHash...)
	}
	if x.fast || x.hashes == nil {
		k := x.nodes[n].key
		if !x.fast {
			k = x.fast64Of(n)
		}
		return append(dst, byte(k>>56), byte(k>>48), byte(k>>40), byte(k>>32), byte(k>>24), byte(k>>16), byte(k>>8), byte(k))
	}
	off := int(blockOf(n)) * x.hashSize
	return append(dst, x.hashes[off:off+x.hashSize]...)
}

// fast64Of recomputes the Fast64 event hash of block node n from its path: the root's
// namespace, and each block's tokens and multimodal keys. It is for an index that stores
// no event hashes (seeded table keys, Fast64, no observer), so only Hash calls it.
func (x *Index) fast64Of(n int32) uint64 {
	path := x.pathBuf[:0] // scratch: Hash allocates nothing once it has seen the deepest path
	for c := n; x.isBlock(c); c = x.nodes[c].parent {
		path = append(path, c)
	}
	x.pathBuf = path
	ns := x.root(x.nodes[path[len(path)-1]].parent).ns
	h := uint64(fastRoot)
	for i := len(path) - 1; i >= 0; i-- {
		h = fastBlock(h, x.blockTokens(path[i]), x.extraOf(ns, i == len(path)-1, x.mm[path[i]]))
	}
	return h
}

// eventKey is the leading 64 bits of block node n's event hash: what the eviction history
// records, so that Explain's answers do not depend on the table seed. The hash is stored
// whenever the history is on (see New).
func (x *Index) eventKey(n int32) uint64 {
	if x.fast {
		return x.nodes[n].key
	}
	off := int(blockOf(n)) * x.hashSize
	return leading64(x.hashes[off : off+x.hashSize])
}

// leading64 reads the first 8 bytes of h big-endian, zero-padded.
func leading64(h []byte) uint64 {
	var b [8]byte
	copy(b[:], h)
	return binary.BigEndian.Uint64(b[:])
}

// randomSeed draws a table seed nobody outside the process can predict.
func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return binary.LittleEndian.Uint64(b[:])
}

// WithSeed fixes the seed of the index's table keys, which is otherwise drawn at random
// for each index. The seed decides only where blocks sit in the child table, never what
// the index does: hits, evictions, events, hashes and every dump are the same under any
// seed (equality is decided on tokens, ties by ID), so a run is reproducible whatever the
// seed. Keep it secret in production: with a known seed a tenant can craft blocks whose
// keys collide and slow everyone's lookups. Tests fix it to reproduce a table layout.
func WithSeed(seed uint64) Option { return func(c *config) { c.seed, c.seeded = seed, true } }

// blockTokens is the token slice of block node n.
func (x *Index) blockTokens(n int32) []int32 {
	if x.inline {
		return x.nodes[n].tok[:x.bs:x.bs]
	}
	off := int(n-1) * x.bs
	return x.tokens[off : off+x.bs : off+x.bs]
}

// newGen returns a node incarnation number no node has had (see node).
func (x *Index) newGen() uint64 {
	x.gens++
	return x.gens
}

// rootOf returns the root of ns, or 0 if ns has none yet.
func (x *Index) rootOf(ns Namespace) int32 {
	if ns == (Namespace{}) {
		return x.defRoot
	}
	return x.roots[ns]
}

// ensureRoot returns the root of ns, creating it on first use in a free root slot if
// there is one. A root costs one node, one hint, one rootInfo and one map entry, and is
// freed again when its namespace has nothing cached (freeRoot).
func (x *Index) ensureRoot(ns Namespace) int32 {
	if r := x.rootOf(ns); r != 0 {
		return r
	}
	nd := node{key: fastRoot & x.cfg.keyMask, flags: flagRoot}
	var r int32
	if k := len(x.freeRoots); k > 0 {
		r = x.freeRoots[k-1]
		x.freeRoots = x.freeRoots[:k-1]
		nd.gen = x.nodes[r].gen // bumped when freed: cursors of the last tenant are stale
		x.nodes[r] = nd
	} else {
		r = int32(len(x.nodes))
		x.nodes = append(x.nodes, nd)
		x.rootInfo = append(x.rootInfo, rootInfo{})
	}
	ri := rootInfo{ns: ns, hasLo: ns.LoRA != "", hasSa: ns.Salt != ""}
	if ri.hasLo {
		ri.lora = hashString(ns.LoRA)
	}
	if ri.hasSa {
		ri.salt = hashString(ns.Salt)
	}
	x.ctl.epochMix(&ri)
	*x.root(r) = ri
	x.roots[ns] = r
	if ns == (Namespace{}) {
		x.defRoot = r
	}
	return r
}

// dropRoot undoes ensureRoot for the root of ns, which the current call created and gave
// no child: the slot goes back to the free list with its generation unchanged (no cursor
// has seen this incarnation), so a failed Commit leaves the free list as it was.
func (x *Index) dropRoot(ns Namespace) {
	r := x.roots[ns]
	if r == 0 || x.nodes[r].children != 0 {
		panic("kvpage: broken invariant: dropping a namespace root that is in use")
	}
	x.releaseRoot(r, x.nodes[r].gen)
}

// freeRoot frees root r, which has no child: its namespace has nothing cached. The root's
// generation is bumped, so a cursor at r (from Peek or Commit) is stale from now on
// and Commit walks its prompt from the namespace's current root instead, creating it again
// if need be (see resolve): a cursor never commits under whoever reuses the slot.
func (x *Index) freeRoot(r int32) {
	if x.nodes[r].flags&flagRoot == 0 || x.nodes[r].children != 0 {
		panic("kvpage: broken invariant: freeing a namespace root that is in use")
	}
	x.releaseRoot(r, x.newGen())
}

// releaseRoot puts root slot r on the free list with generation gen, dropping its map
// entry and its namespace's strings.
func (x *Index) releaseRoot(r int32, gen uint64) {
	ri := x.root(r)
	if ri.retired {
		x.tombstone(r, gen) // epoch.go: its namespace's entry is another root's now
		return
	}
	delete(x.roots, ri.ns)
	if ri.ns == (Namespace{}) {
		x.defRoot = 0
	}
	*ri = rootInfo{}
	x.nodes[r] = node{gen: gen}
	x.freeRoots = append(x.freeRoots, r)
}

// numRoots is the number of live namespace roots.
func (x *Index) numRoots() int { return len(x.roots) }

// root returns the namespace information of root node r.
func (x *Index) root(r int32) *rootInfo { return &x.rootInfo[int(r)-x.nb-1] }
