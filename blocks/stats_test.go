package blocks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatsCounters(t *testing.T) {
	p := newPool(t, 5, WithNullBlock())
	ids := mustAllocate(t, p, 3)
	require.NoError(t, p.Retain(ids[0]))
	require.NoError(t, p.Release(ids...)) // ids[0] stays held
	_, err := p.Allocate(nil, 4)
	require.ErrorIs(t, err, ErrOutOfBlocks)
	_, err = p.Allocate(nil, -1)
	require.ErrorIs(t, err, ErrInvalidArgument, "a bad count is not a failed allocation")
	require.ErrorIs(t, p.Release(ids[1]), ErrDoubleFree)

	assert.Equal(t, Stats{
		Capacity:          4,
		Free:              3,
		InUse:             1,
		Allocations:       3,
		Releases:          2,
		FailedAllocations: 1,
	}, p.Stats())
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name              string
		stats             Stats
		usage, activeUsge float64
	}{
		{name: "empty", stats: Stats{Capacity: 10, Free: 10}, usage: 0, activeUsge: 0},
		{name: "running requests only", stats: Stats{Capacity: 10, Free: 6, InUse: 4}, usage: 0.4, activeUsge: 0.4},
		{name: "warm cache, no request", stats: Stats{Capacity: 10, Free: 7, InUse: 3, Reclaimable: 3}, usage: 0.3, activeUsge: 0},
		{name: "both", stats: Stats{Capacity: 8, Free: 2, InUse: 6, Reclaimable: 2}, usage: 0.75, activeUsge: 0.5},
		{name: "full", stats: Stats{Capacity: 8, InUse: 8}, usage: 1, activeUsge: 1},
		{name: "zero value", stats: Stats{}, usage: 0, activeUsge: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.InDelta(t, tt.usage, tt.stats.Usage(), 1e-12)
			assert.InDelta(t, tt.activeUsge, tt.stats.ActiveUsage(), 1e-12)
		})
	}
}

// The cache keeps usage up while active usage falls to zero: the two figures vLLM users
// confuse.
func TestUsageWithWarmCache(t *testing.T) {
	p, c := cachedPool(t) // 8 usable: 5 and 6 held by a request (6 also cached), 2 and 4 cached only
	s := p.Stats()
	assert.Equal(t, Stats{Capacity: 8, Free: 4, InUse: 4, Reclaimable: 2, Allocations: 6, Releases: 2}, s)
	assert.InDelta(t, 0.5, s.Usage(), 1e-12)
	assert.InDelta(t, 0.25, s.ActiveUsage(), 1e-12)

	require.NoError(t, p.Release(5, 6)) // the request finishes; 6 stays cached
	s = p.Stats()
	assert.InDelta(t, 3.0/8, s.Usage(), 1e-12, "cached blocks still fill memory")
	assert.InDelta(t, 0.0, s.ActiveUsage(), 1e-12, "but no running request needs them")
	assert.Len(t, c.cached, 3)
}
