package prefix

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Inside a BatchTierEvents batch no node is made: Ensure and Root refuse with NoNode and
// change nothing; an existing node is still found, and once the batch ends both make nodes.
func TestGroupTreeNoNodeInBatch(t *testing.T) {
	g := newTieredTree(t, 10, TierSpec{Medium: MediumCPU, Capacity: 4})
	a := g.Ensure(RootNode, []int32{1, 2})
	require.NotEqual(t, NoNode, a)
	require.NoError(t, g.Cache(3, a, 0))
	before := g.Stats()
	g.BatchTierEvents()
	g.BatchTierEvents() // nested
	require.Equal(t, a, g.Ensure(RootNode, []int32{1, 2}), "an existing node is found")
	require.Equal(t, NoNode, g.Ensure(a, []int32{3, 4}))
	require.Equal(t, NoNode, g.Root(Namespace{Salt: "s"}, true))
	g.FlushTierEvents()
	require.Equal(t, NoNode, g.Ensure(a, []int32{3, 4}), "the outer batch is still open")
	g.FlushTierEvents()
	require.Equal(t, before, g.Stats())
	require.NoError(t, g.CheckInvariants())
	require.NotEqual(t, NoNode, g.Ensure(a, []int32{3, 4}), "made once the batch ended")
	require.NotEqual(t, NoNode, g.Root(Namespace{Salt: "s"}, true))
}
