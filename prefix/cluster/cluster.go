package cluster

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// ClusterIndex learns from KV events which blocks each server of a fleet holds, and
// answers which server holds the longest cached prefix of a prompt: what a KV-aware router
// (llm-d's indexer, Dynamo's router) does, kept small for routing tests and fleet
// simulations.
//
// Blocks are keyed by the 64-bit form of their hash (as llm-d keys them), per server. A
// lookup hashes the prompt's full blocks with the index's Hasher, which must be the
// servers' scheme and seed, and walks them from the first: a server's hit is the number of
// leading blocks it holds. Because a block hash commits to the whole prefix before it, a
// block's key alone says where in which prefix it sits; no tree is needed.
//
// A BlockStored whose parent the index has never seen (its events were lost, or the
// subscriber joined late) is recorded all the same, chain and all, and counted as an
// orphan: lookups cannot reach it through the missing blocks, but as soon as they arrive
// (a replay, a later store of the same prefix) the whole chain below them is reachable,
// without its blocks being sent again. Nothing is silently dropped.
//
// The index checks what it can of the servers' agreement with its hasher: a BlockStored
// whose block size differs from its own is counted in BlockSizeMismatches, and the first
// block of a chain that starts at the root is rehashed (when the index's hasher is
// SHA256CBOR and the event carries extra_keys) and a different hash counted in
// RootMismatches: the seed or the scheme differs, and routing to that server would fail
// silently otherwise.
//
// A block is held per KV-cache group, as llm-d keeps one entry per group: a hybrid
// server's events carry group_idx (kvevents.Event.Group), and a block stays held while any
// group holds it, so a sliding-window group's removal leaves the full-attention group's
// block routable. An event without a group is its own group, apart from group 0, as in
// llm-d's Redis layout. Groups 0 to 62 are kept; a store in a higher one is Refused.
//
// Everything a server sends is bounded: the index holds at most WithMaxBlocksPerServer
// blocks for one server (stores past it are counted in Refused, not recorded), and an
// AllBlocksCleared drops a server's set at once.
//
// A ClusterIndex is safe for concurrent use: one mutex guards it, and Apply releases it
// every applyChunk blocks, so that a lookup never waits for a whole batch (a 100k-block
// batch kept a Route waiting 333 ms when Apply held the lock throughout). A lookup may
// therefore see a batch partly applied, as it would see the batch before or after. A
// lookup hashes its prompt outside that lock, so Apply never waits for hashing, a run of
// blocks at a time, and stops hashing at the first block no server holds; lookups hash
// one at a time, as the hasher belongs to one goroutine. A lookup that Applies keep
// changing the index under starts its walk over at most 3 times, then finishes with the
// lock held: a stream of Applies cannot starve it. One
// server's batches are applied one at a time, in the order Apply was called.
type ClusterIndex struct {
	mu sync.Mutex
	// lookMu serialises lookups, which hash the prompt under it and not under mu, so that
	// Apply never waits for a prompt's hashing. Lock order: lookMu, then mu.
	lookMu    sync.Mutex
	hasher    prefix.Hasher // lookups' (under lookMu)
	mmForm    prefix.MMKeyForm
	bs        int
	maxBlocks int
	chunk     int                 // blocks per hold of the lock in Apply: applyChunk
	onHold    func(acquired bool) // benchmarks: called as Apply takes and releases the lock
	servers   []*clusterServer    // sorted by name: ties go to the first name
	byName    map[string]*clusterServer
	gen       uint64 // under mu: counts the holds of mu that may change servers or blocks

	betweenRuns func() // tests: called by a lookup between two runs, with mu released
	restarts    uint64 // under lookMu: walks started over, over all lookups (tests)

	// Lookup scratch, under lookMu (hits and alive under mu too).
	parent, cur []byte
	mm          []string
	offs        []int
	keys        []uint64 // the prompt's block keys
	alive       []int32
	hits        []int

	// checkRoot's, under mu: its own copy of a SHA256CBOR hasher (nil for another scheme).
	rootHasher *vllmhash.SHA256CBOR
	rootCur    []byte
	rootMM     []string
	rootOffs   []int
	applied    uint64 // batches applied, for sampling invariant checks
}

var _ Index = (*ClusterIndex)(nil)

type clusterServer struct {
	applying sync.Mutex // held by the Apply of this server's batch, across lock releases
	name     string
	blocks   map[uint64]struct{} // held in at least one KV-cache group (slot)
	// groups holds, for a block held in other slots than exactly base, the set of slots
	// holding it (bit i: slot i; see slotOf). A server whose events all carry the same
	// group, or none (every non-hybrid server), leaves it empty: no memory per block.
	groups map[uint64]uint64
	base   uint8 // the slot of a block in blocks but not in groups
	stats  ServerStats
}

// maxSlots is how many KV-cache group slots a server's blocks can be held in: the
// groupless one and groups 0 to 62.
const maxSlots = 64

// slotOf is the slot of an event's entry, as llm-d tells its PodEntries apart: an event
// without group_idx has slot 0, group g slot g+1 (so group 0 and no group are distinct
// entries, as in Redis). ok is false for a group beyond maxSlots.
func slotOf(e *kvevents.Event) (uint8, bool) {
	if !e.HasGroup {
		return 0, true
	}
	if e.Group < 0 || e.Group >= maxSlots-1 {
		return 0, false
	}
	return uint8(e.Group + 1), true
}

// mask returns the slots holding block k (0 when none).
func (s *clusterServer) mask(k uint64) uint64 {
	if m, ok := s.groups[k]; ok {
		return m
	}
	if _, ok := s.blocks[k]; ok {
		return 1 << s.base
	}
	return 0
}

// setMask records the slots holding block k.
func (s *clusterServer) setMask(k, m uint64) {
	switch {
	case m == 0:
		delete(s.blocks, k)
		delete(s.groups, k)
	case m == 1<<s.base:
		s.blocks[k] = struct{}{}
		delete(s.groups, k)
	default:
		s.blocks[k] = struct{}{}
		if s.groups == nil {
			s.groups = make(map[uint64]uint64)
		}
		s.groups[k] = m
	}
}

// ServerStats counts what the index learnt about one server.
type ServerStats struct {
	// Blocks is the number of blocks the server holds now, as far as the index knows.
	Blocks int
	// Batches and Events count what was applied.
	Batches, Events uint64
	// Stored, Removed count blocks; Cleared counts AllBlocksCleared events.
	Stored, Removed, Cleared uint64
	// Orphans counts BlockStored events whose parent block the server was not known to
	// hold.
	Orphans uint64
	// UnknownRemovals counts removed blocks the server was not known to hold (in the
	// event's KV-cache group).
	UnknownRemovals uint64
	// Refused counts stored blocks not recorded because the server was at the index's
	// per-server cap (WithMaxBlocksPerServer), or in a KV-cache group above 62.
	Refused uint64
	// BlockSizeMismatches counts BlockStored events with another block size.
	BlockSizeMismatches uint64
	// RootMismatches counts chains from the root whose first hash the index computes
	// differently: another seed or scheme.
	RootMismatches uint64
}

// Option configures a ClusterIndex.
type Option func(*ClusterIndex)

// DefaultMaxBlocksPerServer is the per-server cap of a ClusterIndex: about 84 MB of index
// per server at the cap, more blocks than a server with a large host-memory tier holds.
const DefaultMaxBlocksPerServer = 1 << 21

// WithMMKeyForm sets the form in which the servers key multimodal inputs in their block
// hashes (default prefix.MMKeyIdentifier, vLLM before March 2026; prefix.MMKeyIdentifierOffset
// for vLLM since), so that lookups of prompts with images hash as the servers do.
func WithMMKeyForm(f prefix.MMKeyForm) Option { return func(c *ClusterIndex) { c.mmForm = f } }

// WithMaxBlocksPerServer caps the blocks the index records for one server (default
// DefaultMaxBlocksPerServer), so that one server, or whoever speaks for it, cannot make the
// router hold unbounded memory. It must be at least 1.
func WithMaxBlocksPerServer(n int) Option { return func(c *ClusterIndex) { c.maxBlocks = n } }

// applyChunk is how many blocks Apply handles per hold of the lock: about 50 µs of map
// work.
const applyChunk = 1024

// NewClusterIndex returns an empty index that hashes prompts with h (the servers' scheme:
// for vLLM servers, vllmhash.NewSHA256CBOR with their PYTHONHASHSEED, or
// vllmhash.NewSHA256CBORDefault when they run without one) in blocks of blockSize tokens.
// h is used by one lookup at a time. A nil h, a block size below 1, a
// cap below 1 or an unknown multimodal key form is refused with an error wrapping
// ErrInvalidArgument.
func NewClusterIndex(h prefix.Hasher, blockSize int, opts ...Option) (*ClusterIndex, error) {
	if h == nil || h.Size() < 1 || h.Size() > kvevents.MaxHashSize {
		return nil, fmt.Errorf("%w: hasher %v", ErrInvalidArgument, h)
	}
	if blockSize < 1 {
		return nil, fmt.Errorf("%w: block size %d", ErrInvalidArgument, blockSize)
	}
	c := &ClusterIndex{maxBlocks: DefaultMaxBlocksPerServer, chunk: applyChunk}
	for _, o := range opts {
		o(c)
	}
	if c.maxBlocks < 1 {
		return nil, fmt.Errorf("%w: at most %d blocks per server", ErrInvalidArgument, c.maxBlocks)
	}
	if c.mmForm > prefix.MMKeyIdentifierOffset {
		return nil, fmt.Errorf("%w: multimodal key form %v", ErrInvalidArgument, c.mmForm)
	}
	*c = ClusterIndex{
		maxBlocks:   c.maxBlocks,
		chunk:       c.chunk,
		onHold:      c.onHold,
		betweenRuns: c.betweenRuns,
		mmForm:      c.mmForm,
		hasher:      h,
		bs:          blockSize,
		byName:      make(map[string]*clusterServer),
		parent:      make([]byte, h.Size()),
		cur:         make([]byte, h.Size()),
	}
	if _, ok := h.(*vllmhash.SHA256CBOR); ok {
		var root [vllmhash.HashSize]byte
		h.Root(root[:])
		c.rootHasher, c.rootCur = vllmhash.NewSHA256CBORFromRoot(root), make([]byte, vllmhash.HashSize)
	}
	return c, nil
}

// BlockSize returns the block size of lookups.
func (c *ClusterIndex) BlockSize() int { return c.bs }

// HashSize returns the length of the servers' byte-string block hashes (the hasher's
// Size()): what a subscriber's kvevents.Decoder must accept.
func (c *ClusterIndex) HashSize() int { return c.hasher.Size() }

// AddServer registers a server (Apply does it on first sight); registering twice is
// harmless.
func (c *ClusterIndex) AddServer(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.server(name)
}

func (c *ClusterIndex) server(name string) *clusterServer {
	if s := c.byName[name]; s != nil {
		return s
	}
	s := &clusterServer{name: name, blocks: make(map[uint64]struct{})}
	c.gen++
	c.byName[name] = s
	i, _ := slices.BinarySearchFunc(c.servers, name, func(s *clusterServer, n string) int { return strings.Compare(s.name, n) })
	c.servers = slices.Insert(c.servers, i, s)
	return s
}

// Apply applies one batch of a server's events, in order. It holds the index's lock for
// at most applyChunk blocks at a time. A nil batch is refused with an error wrapping
// ErrInvalidArgument.
func (c *ClusterIndex) Apply(server string, b *kvevents.Batch) error {
	if b == nil {
		return fmt.Errorf("%w: nil batch", ErrInvalidArgument)
	}
	c.mu.Lock()
	s := c.server(server)
	c.mu.Unlock()
	s.applying.Lock()
	defer s.applying.Unlock()
	c.lock()
	defer c.unlock()
	s.stats.Batches++
	work := 0
	for i := range b.Events {
		c.apply(s, &b.Events[i], &work)
	}
	c.applied++
	if invariant.Sample(c.applied) {
		invariant.Check(c.checkInvariants)
	}
	return nil
}

// yield counts one block of work and, every applyChunk blocks, lets waiting lookups in.
// Called with c.mu held; s.applying keeps the server's batch to itself meanwhile.
func (c *ClusterIndex) yield(work *int) {
	if *work++; *work < c.chunk {
		return
	}
	*work = 0
	c.unlock()
	runtime.Gosched() // a waiter woken by Unlock gets to run before we lock again
	c.lock()
}

// lock and unlock are Apply's hold of the lock.
func (c *ClusterIndex) lock() {
	c.mu.Lock()
	c.gen++
	if c.onHold != nil {
		c.onHold(true)
	}
}

func (c *ClusterIndex) unlock() {
	if c.onHold != nil {
		c.onHold(false)
	}
	c.mu.Unlock()
}

// CheckInvariants verifies the index's bookkeeping: servers sorted by name and reachable
// by name, every server's block count what its set holds and within the cap, and stored blocks no fewer than
// the blocks held plus those removed.
func (c *ClusterIndex) CheckInvariants() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkInvariants()
}

func (c *ClusterIndex) checkInvariants() error {
	if len(c.servers) != len(c.byName) {
		return fmt.Errorf("cluster: %d servers listed, %d by name", len(c.servers), len(c.byName))
	}
	for i, s := range c.servers {
		if i > 0 && c.servers[i-1].name >= s.name {
			return fmt.Errorf("cluster: servers out of order at %q", s.name)
		}
		if c.byName[s.name] != s {
			return fmt.Errorf("cluster: server %q not found by name", s.name)
		}
		if s.stats.Blocks != len(s.blocks) {
			return fmt.Errorf("cluster: server %q counts %d blocks, holds %d", s.name, s.stats.Blocks, len(s.blocks))
		}
		for k, m := range s.groups {
			if _, ok := s.blocks[k]; !ok || m == 0 || m == 1<<s.base {
				return fmt.Errorf("cluster: server %q has block %d in slots %#x (base %d), held %v", s.name, k, m, s.base, ok)
			}
		}
		if len(s.blocks) > c.maxBlocks {
			return fmt.Errorf("cluster: server %q holds %d blocks, over the cap of %d", s.name, len(s.blocks), c.maxBlocks)
		}
	}
	return nil
}

func (c *ClusterIndex) apply(s *clusterServer, e *kvevents.Event, work *int) {
	s.stats.Events++
	switch e.Kind {
	case kvevents.KindBlockStored:
		if e.BlockSize != c.bs {
			s.stats.BlockSizeMismatches++
		}
		if e.HasParent {
			if _, ok := s.blocks[e.Parent.Uint64()]; !ok {
				s.stats.Orphans++
			}
		} else if len(e.Hashes) > 0 {
			c.checkRoot(s, e)
		}
		slot, ok := slotOf(e)
		if !ok {
			s.stats.Refused += uint64(len(e.Hashes))
			break
		}
		if len(s.blocks) == 0 {
			s.base = slot // the server's usual group: its blocks need no slot set
		}
		for _, h := range e.Hashes {
			c.yield(work)
			k := h.Uint64()
			m := s.mask(k)
			if m == 0 && len(s.blocks) >= c.maxBlocks {
				s.stats.Refused++
				continue
			}
			s.setMask(k, m|1<<slot)
			s.stats.Stored++
		}
	case kvevents.KindBlockRemoved:
		slot, ok := slotOf(e)
		for _, h := range e.Hashes {
			c.yield(work)
			k := h.Uint64()
			m := s.mask(k)
			if !ok || m&(1<<slot) == 0 {
				s.stats.UnknownRemovals++
				continue
			}
			s.setMask(k, m&^(1<<slot))
			s.stats.Removed++
		}
	case kvevents.KindAllBlocksCleared:
		c.yield(work)
		s.blocks = make(map[uint64]struct{}) // O(1): clear would walk every bucket
		s.groups = nil
		s.stats.Cleared++
	}
	s.stats.Blocks = len(s.blocks)
}

// checkRoot rehashes the first block of a chain that starts at the root and counts a
// disagreement. It needs the block's exact extra keys, so it runs only for events that
// carry extra_keys in a shape rootExtra reads, and only with the vLLM scheme.
func (c *ClusterIndex) checkRoot(s *clusterServer, e *kvevents.Event) {
	// extra_keys may be present and empty (`[]`): nothing to rehash with, as without it.
	if c.rootHasher == nil || e.BlockSize != c.bs || len(e.Tokens) < c.bs || len(e.ExtraKeys) == 0 || e.Hashes[0].IsInt {
		return
	}
	x, ok := c.rootExtra(e.ExtraKeys[0])
	if !ok {
		return
	}
	c.rootHasher.Block(c.rootCur, nil, e.Tokens[:c.bs], x)
	if !bytes.Equal(c.rootCur, e.Hashes[0].Bytes) {
		s.stats.RootMismatches++
	}
}

// rootExtra turns one block's extra_keys into the Extra that SHA256CBOR hashes to the same
// bytes. Keys that are all strings hash by their order alone, so they go in as MM
// whatever they are (LoRA, identifiers, salt). With [identifier, offset] pairs (vLLM since
// March 2026) they are LoRA, then the pairs, then the salt, as vLLM orders them; a shape
// that is neither is not rehashed (ok false).
func (c *ClusterIndex) rootExtra(keys []any) (x prefix.Extra, ok bool) {
	c.rootMM, c.rootOffs = c.rootMM[:0], c.rootOffs[:0]
	before, after := -1, 0 // strings before the first pair (-1: no pair yet), and after it
	for _, k := range keys {
		switch v := k.(type) {
		case string:
			if before >= 0 {
				after++
				x.Salt = v
			} else {
				c.rootMM = append(c.rootMM, v)
			}
		case []any:
			id, off, isPair := mmPair(v)
			if !isPair || after > 0 {
				return prefix.Extra{}, false
			}
			if before < 0 {
				before = len(c.rootMM)
			}
			c.rootMM, c.rootOffs = append(c.rootMM, id), append(c.rootOffs, off)
		default:
			return prefix.Extra{}, false
		}
	}
	switch {
	case before < 0:
		return prefix.Extra{MM: c.rootMM}, true
	case before > 1 || after > 1:
		return prefix.Extra{}, false
	case before == 1:
		x.LoRA = c.rootMM[0]
	}
	x.MM, x.MMOffsets = c.rootMM[before:], c.rootOffs
	return x, true
}

// mmPair reads a decoded [identifier, offset] pair: any offset an int holds, as vLLM's
// hash takes any Python int, whichever msgpack width it came in.
func mmPair(v []any) (id string, off int, ok bool) {
	if len(v) != 2 {
		return "", 0, false
	}
	id, ok = v[0].(string)
	if !ok {
		return "", 0, false
	}
	switch n := v[1].(type) {
	case int8:
		return id, int(n), true
	case int16:
		return id, int(n), true
	case int32:
		return id, int(n), true
	case int64:
		if n >= math.MinInt && n <= math.MaxInt { // always on 64 bits
			return id, int(n), true
		}
	case uint8:
		return id, int(n), true
	case uint16:
		return id, int(n), true
	case uint32:
		if uint64(n) <= math.MaxInt {
			return id, int(n), true
		}
	case uint64: // how msgspec writes any offset of 2^32 or more
		if n <= math.MaxInt {
			return id, int(n), true
		}
	}
	return "", 0, false
}

// Match appends to dst every known server's hit for p, the best first (most blocks, then
// name), and returns dst. It allocates nothing when dst has room, and never fails.
func (c *ClusterIndex) Match(dst []ServerHit, p *prefix.Prompt) ([]ServerHit, error) {
	c.lookMu.Lock()
	defer c.lookMu.Unlock()
	c.lookup(p)
	defer c.mu.Unlock()
	from := len(dst)
	for i, s := range c.servers {
		dst = append(dst, ServerHit{Server: s.name, Blocks: c.hits[i]})
	}
	slices.SortStableFunc(dst[from:], func(a, b ServerHit) int { return b.Blocks - a.Blocks })
	return dst, nil
}

// Route returns the server holding the longest cached prefix of p and its length in
// blocks (ties go to the first name); ok is false when no server holds p's first block.
func (c *ClusterIndex) Route(p *prefix.Prompt) (server string, blocks int, ok bool) {
	c.lookMu.Lock()
	defer c.lookMu.Unlock()
	c.lookup(p)
	defer c.mu.Unlock()
	best := -1
	for i := range c.servers {
		if c.hits[i] > 0 && (best < 0 || c.hits[i] > c.hits[best]) {
			best = i
		}
	}
	if best < 0 {
		return "", 0, false
	}
	return c.servers[best].name, c.hits[best], true
}

// lookup fills c.hits with each server's number of leading blocks of p, and returns with
// mu held. It hashes p's full blocks under lookMu alone, so that Apply never waits for
// hashing (about 0.3 µs a block with SHA256CBOR), in runs of firstRun blocks, then twice
// as many each time up to maxRun, and walks each run under mu, stopping at the first
// block no server holds: a prompt no server holds past its first blocks costs a run's
// hashing, not the whole prompt's. The hits are those of one moment, as a walk of the
// whole prompt under one hold of mu would find them: when an Apply (or a new server) held
// mu between two runs, the walk starts over on every block hashed so far.
//
// Restarts are bounded, so that a stream of Applies cannot make a lookup walk its blocks
// again and again (each restart walks all blocks hashed so far: quadratic in the
// prompt): after maxRestarts of them the lookup keeps mu and hashes the rest of its
// prompt under it. A lookup therefore walks at most maxRestarts+1 times the blocks it
// hashes, and finishes whatever Applies do; an Apply then waits for at most the rest of
// that one lookup's hashing, which stops at the first block no server holds.
func (c *ClusterIndex) lookup(p *prefix.Prompt) {
	n := len(p.Tokens) / c.bs
	c.keys = c.keys[:0]
	c.hasher.Root(c.parent)
	run, restarts := firstRun, 0
	c.mu.Lock()
	c.startWalk()
	for len(c.alive) > 0 && len(c.keys) < n {
		walked := len(c.keys)
		if restarts < maxRestarts {
			gen := c.gen
			c.mu.Unlock()
			if c.betweenRuns != nil {
				c.betweenRuns()
			}
			c.hashBlocks(p, min(n, walked+run))
			c.mu.Lock()
			if c.gen != gen {
				restarts++
				c.startWalk()
				walked = 0
			}
		} else {
			c.hashBlocks(p, min(n, walked+run)) // mu held: no Apply comes between runs now
		}
		run = min(2*run, maxRun)
		c.walk(walked)
	}
	c.restarts += uint64(restarts)
}

// firstRun and maxRun bound the runs of blocks a lookup hashes between two walks (see
// lookup): a prompt whose first block no server holds costs 4 blocks' hashing, and one
// every block of which is held about log2(blocks/4) more holds of the lock. maxRestarts
// bounds how often a lookup starts its walk over because the index changed between two
// runs.
const (
	firstRun    = 4
	maxRun      = 256
	maxRestarts = 3
)

// hashBlocks appends to c.keys the 64-bit keys of p's full blocks up to block end
// (exclusive), chaining from the last one hashed. Under lookMu.
func (c *ClusterIndex) hashBlocks(p *prefix.Prompt, end int) {
	for b := len(c.keys); b < end; b++ {
		e := vllmhash.BlockExtraForm(p, b, c.bs, c.mmForm, c.mm, c.offs)
		c.mm = e.MM[:0]
		if e.MMOffsets != nil {
			c.offs = e.MMOffsets[:0]
		}
		c.hasher.Block(c.cur, c.parent, p.Tokens[b*c.bs:(b+1)*c.bs], e)
		c.keys = append(c.keys, vllmhash.Uint64(c.cur))
		c.parent, c.cur = c.cur, c.parent
	}
}

// startWalk clears c.hits and puts every server in the running. Under mu.
func (c *ClusterIndex) startWalk() {
	c.hits = slices.Grow(c.hits[:0], len(c.servers))[:len(c.servers)]
	clear(c.hits)
	c.alive = c.alive[:0]
	for i := range c.servers {
		c.alive = append(c.alive, int32(i))
	}
}

// walk carries c.hits on over c.keys[from:], stopping at the first block that no server
// still in the running holds. Under mu.
func (c *ClusterIndex) walk(from int) {
	for b := from; b < len(c.keys) && len(c.alive) > 0; b++ {
		k := c.keys[b]
		kept := c.alive[:0]
		for _, i := range c.alive {
			if _, ok := c.servers[i].blocks[k]; ok {
				c.hits[i] = b + 1
				kept = append(kept, i)
			}
		}
		c.alive = kept
	}
}

// Servers returns the known servers' names, sorted.
func (c *ClusterIndex) Servers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.servers))
	for i, s := range c.servers {
		out[i] = s.name
	}
	return out
}

// Stats returns what the index knows of server (zero for an unknown one).
func (c *ClusterIndex) Stats(server string) ServerStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.byName[server]; s != nil {
		return s.stats
	}
	return ServerStats{}
}

// Holds reports whether server is known to hold the block whose hash (any length: its
// 64-bit form is used) is h.
func (c *ClusterIndex) Holds(server string, h []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.byName[server]
	if s == nil {
		return false
	}
	_, ok := s.blocks[vllmhash.Uint64(h)]
	return ok
}
