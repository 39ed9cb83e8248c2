package blocks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ReclaimOne is ReclaimInto with a one-element dst, as the prefix index's is.
func (c handoffCache) ReclaimOne() (ID, bool) {
	var one [1]ID
	if c.ReclaimInto(one[:]) == 0 {
		return 0, false
	}
	return one[0], true
}

// allocateOne hands out the block Allocate(nil, 1) would, with the same counters, free
// list and cache, round after round until the pool runs dry; then it reports false and
// changes nothing, not even FailedAllocations (the caller's Allocate counts the failure).
// Each setup is one of allocateOne's paths: the free list, a handoff, a Reclaimer that
// frees blocks (not taken: false), fault injection (not taken: false).
func TestAllocateOneMatchesAllocate(t *testing.T) {
	setups := []struct {
		name  string
		make  func(t *testing.T) (*Pool, *fakeCache)
		takes bool // whether allocateOne serves it at all
	}{
		{"no reclaimer", func(t *testing.T) (*Pool, *fakeCache) { return newPool(t, 5, WithNullBlock()), nil }, true},
		{"handoff", func(t *testing.T) (*Pool, *fakeCache) {
			p, c := cachedPool(t)
			require.NoError(t, p.SetReclaimer(nil))
			require.NoError(t, p.SetReclaimer(handoffCache{c}))
			return p, c
		}, true},
		{"reclaimer without handoff", cachedPool, true},
		{"faults", func(t *testing.T) (*Pool, *fakeCache) {
			p := newPool(t, 5)
			p.SetFaults(&Faults{})
			return p, nil
		}, false},
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			ref, _ := s.make(t)
			p, c := s.make(t)
			for round := 0; ; round++ {
				before := takeSnapshot(p)
				id, ok := p.allocateOne()
				if !ok {
					requireUnchanged(t, before, p, 0)
					got, err := p.Allocate(nil, 1) // the caller's fallback gives the answer
					want, wantErr := ref.Allocate(nil, 1)
					assert.Equal(t, wantErr, err, "round %d", round)
					assert.Equal(t, want, got, "round %d", round)
					assert.Equal(t, takeSnapshot(ref), takeSnapshot(p), "round %d", round)
					if err != nil || !s.takes || (c != nil && p.handoff == nil) {
						return
					}
					t.Fatalf("round %d: allocateOne refused an allocation Allocate served", round)
				}
				want, err := ref.Allocate(nil, 1)
				require.NoError(t, err, "round %d", round)
				require.Equal(t, want, []ID{id}, "round %d", round)
				require.Equal(t, takeSnapshot(ref), takeSnapshot(p), "round %d", round)
				require.NoError(t, p.CheckInvariants())
			}
		})
	}
}

// An empty free list and a handoff with nothing to evict: allocateOne reports false and
// leaves the pool exactly as it was, FailedAllocations included. (That a victim is held
// by no one else is the handoff's check: the prefix index's
// TestReclaimOneChecksAVictimBeforeEvictingIt.)
func TestAllocateOneHandoffDryChangesNothing(t *testing.T) {
	p, c := cachedPool(t)
	require.NoError(t, p.SetReclaimer(nil))
	require.NoError(t, p.SetReclaimer(handoffCache{c}))
	_, err := p.Allocate(nil, p.NumFree())
	require.NoError(t, err)
	c.cached = nil // the cache has nothing left to evict
	before := takeSnapshot(p)
	_, ok := p.allocateOne()
	require.False(t, ok)
	requireUnchanged(t, before, p, 0)
}
