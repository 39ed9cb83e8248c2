package blocks

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// snapshot is everything observable about a pool: its stats, every refcount, and the free
// list in the order the next allocations will take it. Two pools with equal snapshots
// behave identically from then on.
type snapshot struct {
	Stats   Stats
	Refs    []int32
	Free    []ID
	HasNull bool
}

func takeSnapshot(p *Pool) snapshot {
	return snapshot{Stats: p.Stats(), Refs: slices.Clone(p.refs), Free: freeOrder(p), HasNull: p.hasNull}
}

// equal compares two snapshots without reflection.
func (s snapshot) equal(o snapshot) bool {
	return s.Stats == o.Stats && s.HasNull == o.HasNull && slices.Equal(s.Refs, o.Refs) && slices.Equal(s.Free, o.Free)
}

// freeOrder lists the free blocks from the head of the ring: the order Allocate hands them out.
func freeOrder(p *Pool) []ID {
	out := make([]ID, 0, p.nfree)
	for i := range p.nfree {
		out = append(out, p.ring[(p.head+i)%len(p.ring)])
	}
	return out
}

// requireUnchanged asserts that a rejected call left the pool exactly as before. A failed
// allocation may only count itself in FailedAllocations, by failedDelta.
func requireUnchanged(t require.TestingT, before snapshot, p *Pool, failedDelta uint64) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	want := before
	want.Stats.FailedAllocations += failedDelta
	require.Equal(t, want, takeSnapshot(p), "a rejected call must leave the pool exactly as it was")
	require.NoError(t, p.CheckInvariants())
}

func newPool(t testing.TB, numBlocks int, opts ...Option) *Pool {
	t.Helper()
	p, err := New(numBlocks, opts...)
	require.NoError(t, err)
	return p
}

func mustAllocate(t testing.TB, p *Pool, n int) []ID {
	t.Helper()
	ids, err := p.Allocate(nil, n)
	require.NoError(t, err)
	return ids
}

// fakeCache is a Reclaimer standing in for the prefix index: it holds one reference on each
// block it caches, and evicts the ones nobody else holds, oldest cached first, releasing
// them to the pool.
type fakeCache struct {
	pool   *Pool
	cached []ID // eviction order
	calls  []int

	// A lying cache reports extra reclaimable blocks it cannot free, or frees short.
	overReport int
	freeShort  int
}

func newFakeCache(p *Pool) *fakeCache {
	c := &fakeCache{pool: p}
	p.SetReclaimer(c)
	return c
}

// cache takes a reference on id and makes it evictable once every other holder leaves.
// Caching a cached block does nothing, as in the prefix index: the cache holds one
// reference per block, so that Reclaimable counts only blocks Reclaim can really free.
func (c *fakeCache) cache(id ID) error {
	if slices.Contains(c.cached, id) {
		return nil
	}
	if err := c.pool.Retain(id); err != nil {
		return err
	}
	c.cached = append(c.cached, id)
	return nil
}

// uncache drops the cache's reference on the i-th cached block.
func (c *fakeCache) uncache(i int) error {
	id := c.cached[i]
	if err := c.pool.Release(id); err != nil {
		return err
	}
	c.cached = slices.Delete(c.cached, i, i+1)
	return nil
}

func (c *fakeCache) Reclaimable() int {
	n := 0
	for _, id := range c.cached {
		if c.pool.RefCount(id) == 1 {
			n++
		}
	}
	return n + c.overReport
}

func (c *fakeCache) Reclaim(n int) int {
	c.calls = append(c.calls, n)
	want := n - c.freeShort
	freed := 0
	kept := c.cached[:0]
	for _, id := range c.cached {
		if freed < want && c.pool.RefCount(id) == 1 {
			if err := c.pool.Release(id); err != nil {
				panic(err)
			}
			freed++
			continue
		}
		kept = append(kept, id)
	}
	c.cached = kept
	return freed
}
