package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// First on a node or group out of range returns blocks.NullID: before, a group past
// Groups() read the next node's list (here node 1's group 2 is node 2's group 0, which
// caches block 3) and a node past the tree's slots or a negative one panicked.
func TestGroupTreeFirstOutOfRange(t *testing.T) {
	g := newTestTree(t, 10, 4, 2)
	path := pathOf(g, RootNode, []int32{0, 1, 2, 3, 4, 5, 6, 7})
	require.NoError(t, g.Cache(1, path[0], 0))
	require.NoError(t, g.Cache(2, path[0], 1))
	require.NoError(t, g.Cache(3, path[1], 0))
	require.Equal(t, []blocks.ID{1, 2, 3}, []blocks.ID{g.First(path[0], 0), g.First(path[0], 1), g.First(path[1], 0)})
	for _, c := range []struct {
		name string
		n    Node
		g    int
	}{
		{"group past Groups", path[0], 2}, {"group far past", path[0], 1 << 40}, {"negative group", path[1], -1},
		{"NoNode", NoNode, 0}, {"NoNode, last group", NoNode, 1}, {"negative node", -5, 1},
		{"node past the slots", Node(1 << 20), 0}, {"the largest node", Node(1<<31 - 1), 1},
	} {
		require.NotPanics(t, func() {
			require.Equal(t, blocks.NullID, g.First(c.n, c.g), c.name)
		}, c.name)
	}
	require.Equal(t, blocks.ID(1), g.First(path[0], 0), "nothing changed")
}

// Stats allocates nothing; its slices are the tree's copies, overwritten by the next
// call and detached from the tree's counters.
func TestGroupTreeStatsAllocatesNothing(t *testing.T) {
	g := newTestTree(t, 10, 4, 3)
	path := pathOf(g, RootNode, []int32{0, 1, 2, 3, 4, 5, 6, 7})
	require.NoError(t, g.Cache(1, path[0], 0))
	require.NoError(t, g.Cache(2, path[0], 0)) // a duplicate
	require.NoError(t, g.Cache(3, path[1], 2))
	var st GroupTreeStats
	require.Zero(t, testing.AllocsPerRun(100, func() { st = g.Stats() }))
	require.Equal(t, GroupTreeStats{Nodes: 2, Cached: []int{2, 0, 1}, Prefixes: []int{1, 0, 1}, Duplicates: 1}, st)
	st.Cached[0], st.Prefixes[2] = 99, 99
	require.Equal(t, 2, g.CachedIn(0), "changing the copy changes no counter")
	require.Equal(t, 1, g.PrefixesIn(2))
	require.NoError(t, g.Cache(4, path[1], 1))
	st = g.Stats()
	require.Equal(t, []int{2, 1, 1}, st.Cached)
	require.Equal(t, []int{1, 1, 1}, st.Prefixes)
	require.NoError(t, g.CheckInvariants())
}

// NextCached and IsCached on an ID that is not a cached block of the pool: the null
// block, negative IDs and IDs at or past the pool's size are not cached and have no next
// block. Before, an ID outside the pool panicked with an index error.
func TestGroupTreeNextCachedIsCachedOutOfRange(t *testing.T) {
	g := newTestTree(t, 10, 4, 2)
	path := pathOf(g, RootNode, []int32{0, 1, 2, 3})
	require.NoError(t, g.Cache(1, path[0], 0))
	require.NoError(t, g.Cache(2, path[0], 0)) // a duplicate: 1's next
	require.NoError(t, g.Cache(9, path[0], 1)) // the pool's last block
	require.Equal(t, blocks.ID(2), g.NextCached(1))
	require.Equal(t, blocks.NullID, g.NextCached(2))
	require.True(t, g.IsCached(9))
	for _, c := range []struct {
		name string
		b    blocks.ID
	}{
		{"the null block", blocks.NullID}, {"-1", -1}, {"a large negative", -1 << 31},
		{"the pool's size", 10}, {"past the pool", 11}, {"the largest ID", 1<<31 - 1},
		{"an uncached block", 5},
	} {
		require.NotPanics(t, func() {
			require.False(t, g.IsCached(c.b), c.name)
			require.Equal(t, blocks.NullID, g.NextCached(c.b), c.name)
		}, c.name)
	}
	require.Equal(t, blocks.ID(2), g.NextCached(1), "nothing changed")
	require.NoError(t, g.CheckInvariants())
}
