package prefix

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The accessors answer "nothing there" for nodes and groups out of range or freed, and
// Pin/Unpin refuse them with typed errors; Unpin never takes a count below zero.
func TestGroupTreeAccessorsRangeChecked(t *testing.T) {
	g := newTestTree(t, 10, 2, 2)
	n := g.Ensure(RootNode, []int32{1, 2})
	require.NoError(t, g.Cache(1, n, 0))
	freed := g.Ensure(n, []int32{3, 4})
	require.NoError(t, g.Pin(freed))
	require.NoError(t, g.Unpin(freed)) // freed now
	require.False(t, g.IsLive(freed))
	for _, tc := range []struct {
		name string
		node Node
		grp  int
	}{{"negative node", -5, 0}, {"node past the end", 1 << 20, 0}, {"negative group", n, -1}, {"group past the end", n, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, EvictNone, g.Gone(tc.node, tc.grp))
			require.Equal(t, Device, g.LowerTier(tc.node, tc.grp))
			require.False(t, g.HeldBelow(tc.node, tc.grp))
		})
	}
	for _, bad := range []Node{-5, 1 << 20, freed} {
		require.Equal(t, NoNode, g.Parent(bad))
		require.False(t, g.IsRoot(bad) && bad != RootNode)
		require.Zero(t, g.Pins(bad))
		require.ErrorIs(t, g.Pin(bad), ErrInvalidArgument)
		require.ErrorIs(t, g.Unpin(bad), ErrInvalidArgument)
	}
	require.ErrorIs(t, g.Unpin(n), ErrNotPinned, "no pin to undo")
	require.Zero(t, g.Pins(n))
	require.NoError(t, g.Pin(RootNode), "the root needs no pin")
	require.NoError(t, g.Unpin(RootNode))
	require.NoError(t, g.CheckInvariants())
}
