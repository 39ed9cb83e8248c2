package blocks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cachedPool returns a pool of 9 blocks (null block + 8) in which a request holds 1..6,
// the cache holds 2, 4 and 6 as well, and then the request releases 1..4: 1 and 3 go back to
// the free list, 2 and 4 stay cached and reclaimable, 5 and 6 stay held (6 also cached).
// Free list: 7 8 1 3. Reclaimable: 2 4.
func cachedPool(t *testing.T) (*Pool, *fakeCache) {
	p := newPool(t, 9, WithNullBlock())
	c := newFakeCache(p)
	ids := mustAllocate(t, p, 6)
	for _, id := range []ID{2, 4, 6} {
		require.NoError(t, c.cache(id))
	}
	require.NoError(t, p.Release(ids[:4]...))
	require.Equal(t, []ID{7, 8, 1, 3}, freeOrder(p))
	require.Equal(t, 2, c.Reclaimable())
	return p, c
}

func TestReclaimer(t *testing.T) {
	tests := []struct {
		name       string
		n          int
		want       []ID  // blocks handed out
		wantCalls  []int // what the cache was asked to free
		wantCached []ID  // what the cache holds afterwards
		// For a failed allocation: the figures of the *OutOfBlocksError.
		wantErr              bool
		requested, available int
	}{
		{name: "free list covers it: the cache is not asked", n: 4, want: []ID{7, 8, 1, 3}, wantCached: []ID{2, 4, 6}},
		{name: "one short: evicts exactly one", n: 5, want: []ID{7, 8, 1, 3, 2}, wantCalls: []int{1}, wantCached: []ID{4, 6}},
		{name: "free plus every reclaimable block", n: 6, want: []ID{7, 8, 1, 3, 2, 4}, wantCalls: []int{2}, wantCached: []ID{6}},
		{name: "one more than free plus reclaimable: evicts nothing", n: 7, wantErr: true, requested: 7, available: 6, wantCached: []ID{2, 4, 6}},
		{name: "far more than capacity", n: 100, wantErr: true, requested: 100, available: 6, wantCached: []ID{2, 4, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, c := cachedPool(t)
			before := takeSnapshot(p)
			got, err := p.Allocate(nil, tt.n)
			assert.Equal(t, tt.wantCalls, c.calls)
			assert.Equal(t, tt.wantCached, c.cached)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrOutOfBlocks)
				var oob *OutOfBlocksError
				require.ErrorAs(t, err, &oob)
				assert.Equal(t, OutOfBlocksError{Requested: tt.requested, Available: tt.available}, *oob)
				assert.Nil(t, got)
				requireUnchanged(t, before, p, 1)
				return
			}
			require.NoError(t, err)
			require.NoError(t, p.CheckInvariants())
			assert.Equal(t, tt.want, got)
			s := p.Stats()
			reclaimed := uint64(0)
			if len(tt.wantCalls) > 0 {
				reclaimed = uint64(tt.wantCalls[0])
			}
			assert.Equal(t, before.Stats.Reclaimed+reclaimed, s.Reclaimed)
			assert.Equal(t, before.Stats.Releases+reclaimed, s.Releases, "reclaimed blocks are released to the pool")
			assert.Equal(t, before.Stats.Allocations+uint64(tt.n), s.Allocations)
			assert.Equal(t, before.Stats.Free+int(reclaimed)-tt.n, s.Free)
		})
	}
}

// A Reclaimer that reports blocks it cannot free breaks the contract the pool relies on to
// never evict and then fail: that is a bug, and the pool panics rather than return a
// half-done allocation.
func TestLyingReclaimerPanics(t *testing.T) {
	tests := []struct {
		name       string
		overReport int
		freeShort  int
	}{
		{name: "reports more than it holds", overReport: 3},
		{name: "frees fewer than asked", freeShort: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, c := cachedPool(t)
			c.overReport, c.freeShort = tt.overReport, tt.freeShort
			defer func() {
				r := recover()
				require.NotNil(t, r, "a lying reclaimer must make Allocate panic")
				assert.Contains(t, r, "broken invariant")
			}()
			_, _ = p.Allocate(nil, 6+tt.overReport)
		})
	}
}

// Reclaimed counts the blocks that actually came back, whatever Reclaim returns and however
// many it was asked for: this cache frees one block more than asked and claims 1000.
type generousCache struct{ *fakeCache }

func (g generousCache) Reclaim(n int) int { g.fakeCache.Reclaim(n + 1); return 1000 }

func TestReclaimedCountsBlocksThatCameBack(t *testing.T) {
	p, c := cachedPool(t)
	require.NoError(t, p.SetReclaimer(nil))
	require.NoError(t, p.SetReclaimer(generousCache{c}))
	got, err := p.Allocate(nil, 5)
	require.NoError(t, err)
	assert.Equal(t, []ID{7, 8, 1, 3, 2}, got)
	assert.Equal(t, []ID{4}, freeOrder(p), "the extra block is free")
	assert.Equal(t, uint64(2), p.Stats().Reclaimed)
	require.NoError(t, p.CheckInvariants())
}

func TestSetReclaimer(t *testing.T) {
	p, c := cachedPool(t)
	assert.Equal(t, 6, p.Available())
	require.NoError(t, p.SetReclaimer(nil))
	assert.Equal(t, 4, p.Available())
	assert.Zero(t, p.Stats().Reclaimable)
	_, err := p.Allocate(nil, 5)
	require.ErrorIs(t, err, ErrOutOfBlocks)
	assert.Empty(t, c.calls, "a removed reclaimer is not asked")

	q := newPool(t, 4)
	require.NoError(t, q.SetReclaimer(fixedReclaimable(3)))
	assert.Equal(t, 4+3, q.Available())
	assert.Equal(t, 3, q.Stats().Reclaimable)
}

// A pool has one Reclaimer: a second one (a second index over the pool) is refused and
// the first stays.
func TestSetReclaimerRefusesASecond(t *testing.T) {
	q := newPool(t, 4)
	require.NoError(t, q.SetReclaimer(fixedReclaimable(3)))
	require.ErrorIs(t, q.SetReclaimer(fixedReclaimable(1)), ErrReclaimerSet)
	assert.Equal(t, 3, q.Stats().Reclaimable, "the first reclaimer stays")
	require.NoError(t, q.SetReclaimer(nil))
	require.NoError(t, q.SetReclaimer(fixedReclaimable(1)), "once removed, another may be set")
	assert.Equal(t, 1, q.Stats().Reclaimable)
}

// fixedReclaimable reports a fixed number of reclaimable blocks and never frees any.
type fixedReclaimable int

func (f fixedReclaimable) Reclaimable() int { return int(f) }
func (f fixedReclaimable) Reclaim(int) int  { return 0 }
