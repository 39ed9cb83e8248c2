package blocks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handoffCache is fakeCache with the prefix index's handoff (internal/poolrefs.Handoff):
// its victims are written into the allocation, keeping their one reference.
type handoffCache struct{ *fakeCache }

func (c handoffCache) ReclaimInto(dst []ID) int {
	c.calls = append(c.calls, len(dst))
	got := 0
	kept := c.cached[:0]
	for _, id := range c.cached {
		if got < len(dst)-c.freeShort && c.pool.RefCount(id) == 1 {
			dst[got] = id
			got++
			continue
		}
		kept = append(kept, id)
	}
	c.cached = kept
	return got
}

// An allocation served through the handoff hands out the same IDs, in the same order, and
// leaves the same free list, counters and cache as one served through Reclaim and the free
// list; only the evicted blocks' trip through the free list is skipped.
func TestHandoffMatchesReclaim(t *testing.T) {
	for _, n := range []int{1, 4, 5, 6, 7} {
		ref, refCache := cachedPool(t)
		hp, hpCache := cachedPool(t)
		require.NoError(t, hp.SetReclaimer(nil))
		hc := handoffCache{hpCache}
		require.NoError(t, hp.SetReclaimer(hc))
		require.NotNil(t, hp.handoff)
		// Twice: the second allocation starts from the ring the first one left.
		for round := 0; round < 2; round++ {
			want, wantErr := ref.Allocate(nil, n)
			got, err := hp.Allocate(nil, n)
			assert.Equal(t, wantErr, err, "n=%d round %d", n, round)
			assert.Equal(t, want, got, "n=%d round %d", n, round)
			assert.Equal(t, ref.Stats(), hp.Stats(), "n=%d round %d", n, round)
			assert.Equal(t, freeOrder(ref), freeOrder(hp), "n=%d round %d", n, round)
			assert.Equal(t, refCache.cached, hc.cached)
			assert.Equal(t, refCache.calls, hc.calls)
			require.NoError(t, hp.CheckInvariants())
			for _, id := range got {
				assert.Equal(t, 1, hp.RefCount(id))
			}
			// Give the blocks back and cache some again, so the next round evicts too.
			require.NoError(t, ref.Release(want...))
			require.NoError(t, hp.Release(got...))
		}
	}
}

// A handoff that evicts fewer blocks than it reported reclaimable is a broken invariant.
func TestHandoffShortPanics(t *testing.T) {
	p, c := cachedPool(t)
	require.NoError(t, p.SetReclaimer(nil))
	c.freeShort = 1
	require.NoError(t, p.SetReclaimer(handoffCache{c}))
	assert.Panics(t, func() { _, _ = p.Allocate(nil, 6) })
}
