package cluster

import (
	"bytes"
	"fmt"
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
// A ClusterIndex is safe for concurrent use: one mutex guards it.
var _ Index = (*ClusterIndex)(nil)

type ClusterIndex struct {
	mu      sync.Mutex
	hasher  prefix.Hasher
	bs      int
	servers []*clusterServer // sorted by name: ties go to the first name
	byName  map[string]*clusterServer

	// Lookup scratch.
	parent, cur []byte
	mm          []string
	alive       []int32
	hits        []int
	applied     uint64 // batches applied, for sampling invariant checks
}

type clusterServer struct {
	name   string
	blocks map[uint64]struct{}
	stats  ServerStats
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
	// UnknownRemovals counts removed blocks the server was not known to hold.
	UnknownRemovals uint64
	// BlockSizeMismatches counts BlockStored events with another block size.
	BlockSizeMismatches uint64
	// RootMismatches counts chains from the root whose first hash the index computes
	// differently: another seed or scheme.
	RootMismatches uint64
}

// NewClusterIndex returns an empty index that hashes prompts with h (the servers' scheme:
// for vLLM servers, NewSHA256CBOR with their PYTHONHASHSEED) in blocks of blockSize tokens.
// h is used under the index's lock only. A nil h or a block size below 1 is refused with an
// error wrapping ErrInvalidArgument.
func NewClusterIndex(h prefix.Hasher, blockSize int) (*ClusterIndex, error) {
	if h == nil || h.Size() < 1 {
		return nil, fmt.Errorf("%w: hasher %v", ErrInvalidArgument, h)
	}
	if blockSize < 1 {
		return nil, fmt.Errorf("%w: block size %d", ErrInvalidArgument, blockSize)
	}
	return &ClusterIndex{
		hasher: h,
		bs:     blockSize,
		byName: make(map[string]*clusterServer),
		parent: make([]byte, h.Size()),
		cur:    make([]byte, h.Size()),
	}, nil
}

// BlockSize returns the block size of lookups.
func (c *ClusterIndex) BlockSize() int { return c.bs }

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
	c.byName[name] = s
	i, _ := slices.BinarySearchFunc(c.servers, name, func(s *clusterServer, n string) int { return strings.Compare(s.name, n) })
	c.servers = slices.Insert(c.servers, i, s)
	return s
}

// Apply applies one batch of a server's events, in order. A nil batch is refused with an
// error wrapping ErrInvalidArgument.
func (c *ClusterIndex) Apply(server string, b *kvevents.Batch) error {
	if b == nil {
		return fmt.Errorf("%w: nil batch", ErrInvalidArgument)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.server(server)
	s.stats.Batches++
	for i := range b.Events {
		c.apply(s, &b.Events[i])
	}
	c.applied++
	if invariant.Sample(c.applied) {
		invariant.Check(c.checkInvariants)
	}
	return nil
}

// CheckInvariants verifies the index's bookkeeping: servers sorted by name and reachable
// by name, every server's block count what its set holds, and stored blocks no fewer than
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
	}
	return nil
}

func (c *ClusterIndex) apply(s *clusterServer, e *kvevents.Event) {
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
		for _, h := range e.Hashes {
			s.blocks[h.Uint64()] = struct{}{}
		}
		s.stats.Stored += uint64(len(e.Hashes))
	case kvevents.KindBlockRemoved:
		for _, h := range e.Hashes {
			k := h.Uint64()
			if _, ok := s.blocks[k]; !ok {
				s.stats.UnknownRemovals++
				continue
			}
			delete(s.blocks, k)
			s.stats.Removed++
		}
	case kvevents.KindAllBlocksCleared:
		clear(s.blocks)
		s.stats.Cleared++
	}
	s.stats.Blocks = len(s.blocks)
}

// checkRoot rehashes the first block of a chain that starts at the root and counts a
// disagreement. It needs the block's exact extra keys, so it runs only for events that
// carry extra_keys (all strings), and only with the vLLM scheme, whose hash of the keys
// depends only on their order.
func (c *ClusterIndex) checkRoot(s *clusterServer, e *kvevents.Event) {
	h, ok := c.hasher.(*vllmhash.SHA256CBOR)
	if !ok || e.BlockSize != c.bs || len(e.Tokens) < c.bs || e.ExtraKeys == nil || e.Hashes[0].IsInt {
		return
	}
	c.mm = c.mm[:0]
	for _, k := range e.ExtraKeys[0] {
		str, ok := k.(string)
		if !ok {
			return
		}
		c.mm = append(c.mm, str)
	}
	h.Block(c.cur, nil, e.Tokens[:c.bs], prefix.Extra{MM: c.mm})
	if !bytes.Equal(c.cur, e.Hashes[0].Bytes) {
		s.stats.RootMismatches++
	}
}

// Match appends to dst every known server's hit for p, the best first (most blocks, then
// name), and returns dst. It allocates nothing when dst has room, and never fails.
func (c *ClusterIndex) Match(dst []ServerHit, p *prefix.Prompt) ([]ServerHit, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.walk(p)
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
	c.mu.Lock()
	defer c.mu.Unlock()
	c.walk(p)
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

// walk fills c.hits with each server's number of leading blocks of p, hashing p's blocks
// one at a time and stopping at the first block that no server still in the running holds.
func (c *ClusterIndex) walk(p *prefix.Prompt) {
	c.hits = slices.Grow(c.hits[:0], len(c.servers))[:len(c.servers)]
	clear(c.hits)
	c.alive = c.alive[:0]
	for i := range c.servers {
		c.alive = append(c.alive, int32(i))
	}
	c.hasher.Root(c.parent)
	for b := 0; b < len(p.Tokens)/c.bs && len(c.alive) > 0; b++ {
		e := vllmhash.BlockExtra(p, b, c.bs, c.mm)
		c.mm = e.MM[:0]
		c.hasher.Block(c.cur, c.parent, p.Tokens[b*c.bs:(b+1)*c.bs], e)
		k := vllmhash.Uint64(c.cur)
		kept := c.alive[:0]
		for _, i := range c.alive {
			if _, ok := c.servers[i].blocks[k]; ok {
				c.hits[i] = b + 1
				kept = append(kept, i)
			}
		}
		c.alive = kept
		c.parent, c.cur = c.cur, c.parent
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
