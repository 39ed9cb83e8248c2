package kvtest_test

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
)

// sysModel is the reference model of the whole-system test: a deliberately naive picture
// of what the stack must hold, built from the calls the test makes and from the index's
// events, and checked against the real stack after every step.
//
//   - seqs: each running sequence's namespace, tokens and table length (blocks cover the
//     tokens plus the largest lookahead asked for since the last truncation);
//   - cache: the prefix tree as the index's events describe it, one entry per cached block
//     (its parent block, or its namespace's root, and its tokens), with a map from
//     (parent, tokens) to block: a stored block must not duplicate a cached sibling, and an
//     evicted block must be a leaf that no sequence holds;
//   - dev: fake device memory, the token written in every KV slot. The test writes every
//     token a sequence gets through the sequence's own table, executes copy-on-writes as
//     a server would, and then every position of every running sequence must read back
//     its own token, and every cached block must hold its own tokens: no table points at
//     another sequence's KV or at a block that was freed and reused, and no prefix hit
//     hands out KV that differs from the prompt.
type sysModel struct {
	bs     int
	seqs   map[blocktable.SeqID]*modelSeq
	cache  []*cacheEntry        // per block; nil when not cached
	cached int                  // cached blocks
	child  map[string]blocks.ID // childKey(parent, tokens) -> block
	kids   []int32              // cached children per cached block
	byKey  map[uint64]blocks.ID // event hash -> block
	nsIdx  map[prefix.Namespace]int
	dev    []int32
	held   func() holders // table entries per block, set by the driver

	// Counters from events within the current step.
	stored, removed int
	cleared         bool
	err             error // first inconsistency seen in an event
}

type modelSeq struct {
	ns     prefix.Namespace
	tokens []int32
	blocks int // table length
}

type cacheEntry struct {
	parent int64 // parent block, or -1 - namespace index for a namespace's first block
	tokens []int32
	hash   uint64
}

func newSysModel(numBlocks, bs int) *sysModel {
	m := &sysModel{
		bs:    bs,
		seqs:  map[blocktable.SeqID]*modelSeq{},
		cache: make([]*cacheEntry, numBlocks),
		child: map[string]blocks.ID{},
		kids:  make([]int32, numBlocks),
		byKey: map[uint64]blocks.ID{},
		nsIdx: map[prefix.Namespace]int{},
		dev:   make([]int32, numBlocks*bs),
	}
	for i := range m.dev {
		m.dev[i] = -1
	}
	return m
}

func (m *sysModel) root(ns prefix.Namespace) int64 {
	i, ok := m.nsIdx[ns]
	if !ok {
		i = len(m.nsIdx)
		m.nsIdx[ns] = i
	}
	return -1 - int64(i)
}

func childKey(parent int64, toks []int32) string {
	b := make([]byte, 8+4*len(toks))
	binary.LittleEndian.PutUint64(b, uint64(parent))
	for i, t := range toks {
		binary.LittleEndian.PutUint32(b[8+4*i:], uint32(t))
	}
	return string(b)
}

func (m *sysModel) fail(format string, args ...any) {
	if m.err == nil {
		m.err = fmt.Errorf(format, args...)
	}
}

// BlockStored adds a chain of blocks to the model's tree.
func (m *sysModel) BlockStored(e *prefix.BlockStored) {
	m.stored += len(e.Blocks)
	parent := m.root(e.Namespace)
	if e.Parent != nil {
		b, ok := m.byKey[binary.BigEndian.Uint64(e.Parent)]
		if !ok {
			m.fail("stored blocks %v under a parent hash the model does not know", e.Blocks)
			return
		}
		parent = int64(b)
	}
	for i, b := range e.Blocks {
		toks := slices.Clone(e.Tokens[i*m.bs : (i+1)*m.bs])
		if m.cache[b] != nil {
			m.fail("block %d stored twice", b)
			return
		}
		k := childKey(parent, toks)
		if other, dup := m.child[k]; dup {
			m.fail("block %d stored with the same tokens under the same parent as cached block %d", b, other)
			return
		}
		h := binary.BigEndian.Uint64(e.Hash(i))
		m.cache[b] = &cacheEntry{parent: parent, tokens: toks, hash: h}
		m.cached++
		m.child[k] = b
		m.byKey[h] = b
		if parent >= 0 {
			m.kids[blocks.ID(parent)]++
		}
		parent = int64(b)
	}
}

// BlockRemoved drops evicted blocks, which must be unheld leaves.
func (m *sysModel) BlockRemoved(e *prefix.BlockRemoved) {
	m.removed += len(e.Blocks)
	held := m.heldBlocks()
	for _, b := range e.Blocks {
		c := m.cache[b]
		switch {
		case c == nil:
			m.fail("evicted block %d is not cached", b)
			return
		case m.kids[b] > 0:
			m.fail("evicted block %d has %d cached children", b, m.kids[b])
			return
		case held[b] > 0:
			m.fail("evicted block %d is held by %d table entries", b, held[b])
			return
		}
		m.drop(b, c)
	}
}

func (m *sysModel) drop(b blocks.ID, c *cacheEntry) {
	delete(m.child, childKey(c.parent, c.tokens))
	delete(m.byKey, c.hash)
	m.cache[b] = nil
	m.cached--
	m.kids[b] = 0
	if c.parent >= 0 {
		m.kids[blocks.ID(c.parent)]--
	}
}

// AllBlocksCleared empties the model's tree.
func (m *sysModel) AllBlocksCleared() {
	m.cleared = true
	clear(m.cache)
	m.cached = 0
	clear(m.child)
	clear(m.kids)
	clear(m.byKey)
}

// heldBlocks counts table entries per block, from the tables the Manager reports (their
// content is checked against dev, their length against the model).
func (m *sysModel) heldBlocks() holders { return m.held() }

// holders counts table entries per block.
type holders []int32

// match is the model's prefix match: the cached blocks along prompt's full blocks, capped
// so that at least one token is left to compute.
func (m *sysModel) match(ns prefix.Namespace, prompt []int32) []blocks.ID {
	var out []blocks.ID
	parent := m.root(ns)
	for k := 0; (k+1)*m.bs <= len(prompt)-1; k++ {
		b, ok := m.child[childKey(parent, prompt[k*m.bs:(k+1)*m.bs])]
		if !ok {
			break
		}
		out = append(out, b)
		parent = int64(b)
	}
	return out
}

// pinned marks the cached blocks that are held, or lie on the path to one that is, and
// counts them.
func (m *sysModel) pinned(held holders) ([]bool, int) {
	pin := make([]bool, len(held))
	n := 0
	for b, h := range held {
		if h == 0 {
			continue
		}
		for c := m.cache[b]; c != nil && !pin[b]; c = m.cache[b] {
			pin[b] = true
			n++
			if c.parent < 0 {
				break
			}
			b = int(c.parent)
		}
	}
	return pin, n
}

// holding is how many blocks are held: by a table entry, or cached on the path to one.
// Capacity - holding is what an allocation can have (free plus evictable).
func (m *sysModel) holding(held holders) int {
	pin, _ := m.pinned(held)
	n := 0
	for b, h := range held {
		if h > 0 || pin[b] {
			n++
		}
	}
	return n
}

// reclaimable is how many cached blocks repeated leaf eviction can free now.
func (m *sysModel) reclaimable(held holders) int {
	_, n := m.pinned(held)
	return m.cached - n
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
