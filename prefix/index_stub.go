package prefix

import "github.com/kvpage/kvpage/blocks"

// Index is the radix-tree prefix index. See doc.go.
type Index struct{ cfg config }

// New builds an index over pool for blocks of blockSize tokens and plugs itself in as the
// pool's Reclaimer.
func New(pool *blocks.Pool, blockSize int, opts ...Option) (*Index, error) { panic("TODO") }

// Match appends to dst the cached blocks of the longest cached prefix of p, in full blocks,
// and returns dst. It takes no references and touches nothing. With leaveOne, the match is
// capped so that at least one prompt token is left to compute (vLLM caps at len-1: the
// model needs the last token's logits). The returned Cursor sits at the end of the match.
func (x *Index) Match(dst []blocks.ID, p *Prompt, leaveOne bool) ([]blocks.ID, Cursor) {
	panic("TODO")
}

// Acquire takes one reference on each of ids (cached blocks a request matched), takes them
// off the evictable set and touches them. All or nothing.
func (x *Index) Acquire(ids []blocks.ID) error { panic("TODO") }

// Release drops the caller's reference on each of ids. Cached blocks left with only the
// index's reference become evictable (leaves first); uncached blocks go back to the pool.
// All or nothing: releasing a cached block nobody acquired fails and changes nothing.
func (x *Index) Release(ids []blocks.ID) error { panic("TODO") }

// Cursor returns a cursor at the root of p's namespace, for a sequence with no hit.
func (x *Index) Cursor(ns Namespace) Cursor { panic("TODO") }

// Commit caches the caller's full blocks ids, whose tokens are tokens (len(ids) x block
// size) starting at the cursor's position in p (p supplies the namespace and multimodal
// inputs; tokens must equal p.Tokens[cur.Blocks()*B : (cur.Blocks()+len(ids))*B]), and
// advances the cursor. The caller keeps its own references. See CommitResult for duplicates.
func (x *Index) Commit(cur *Cursor, p *Prompt, ids []blocks.ID) (CommitResult, error) {
	panic("TODO")
}

// Evict evicts up to n evictable cached blocks, in policy order, and returns how many.
func (x *Index) Evict(n int) int { panic("TODO") }

// Reclaimable is the number of cached blocks that repeated leaf eviction can free now.
func (x *Index) Reclaimable() int { panic("TODO") }

// Reclaim implements blocks.Reclaimer: it evicts at least n blocks.
func (x *Index) Reclaim(n int) int { panic("TODO") }

// Reset drops every cached block; it fails with ErrBlocksHeld while any request holds one.
func (x *Index) Reset() error { panic("TODO") }

// IsCached reports whether id is a block of the index.
func (x *Index) IsCached(id blocks.ID) bool { panic("TODO") }

// CheckInvariants verifies the tree against the pool.
func (x *Index) CheckInvariants() error { panic("TODO") }
