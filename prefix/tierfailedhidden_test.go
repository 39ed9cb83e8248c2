package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// A failed load dooms the copy its source is making into the tier below (failSlot): a
// pending slot there. A slot below that a failed load of its own hid is pending too, but
// it receives no copy: before, a failed load from the host doomed the disk's hidden slot,
// which then counted as a copy in flight that was read and leaving (CheckInvariants
// failed; the GroupTree tier machine found it). Both trees: the host's and the disk's
// slots are hidden by a failed load each while a second load reads each, then the host's
// second load fails.
func TestIndexFailedLoadDoomsNoHiddenSlot(t *testing.T) {
	pool, x := newTestIndex(t, 12, WithTiers(failedSlotTiers(true)))
	p := Prompt{Tokens: toks(100, 9)} // 2 full blocks
	admit(t, x, pool, p).finish(t, x)
	completeAll(t, x, x.TakePlans(nil), true) // into the host
	completeAll(t, x, x.TakePlans(nil), true) // the host's copy into the disk
	require.Equal(t, 2, x.Evict(2))
	_, cur := x.Peek(nil, &p, LeaveOne)
	load := func() TransferID {
		dst, err := pool.Allocate(nil, 2)
		require.NoError(t, err)
		ld, err := x.PrepareLoad(&p, cur, LeaveOne, dst)
		require.NoError(t, err)
		x.TakePlans(nil)
		return ld
	}
	fail := func(ld TransferID) {
		_, err := x.CompleteTransfer(ld, false)
		require.NoError(t, err)
		require.NoError(t, x.CheckInvariants())
	}
	h1, h2 := load(), load() // from the host
	fail(h1)
	require.Equal(t, [MaxTiers]int{0, 0, 2, 0}, x.PeekLower(&p, cur, LeaveOne, 0).Blocks)
	d1, d2 := load(), load() // from the disk
	fail(d1)
	fail(h2)
	_, err := x.CompleteTransfer(d2, true)
	require.NoError(t, err)
	require.NoError(t, x.CheckInvariants())
	for ti := Tier(1); ti <= 2; ti++ {
		require.Zero(t, x.TierStatsOf(ti).Pending)
		require.Zero(t, x.TierStatsOf(ti).Resident)
	}
}

func TestGroupTreeFailedLoadDoomsNoHiddenSlot(t *testing.T) {
	g := newTestTree(t, 20, 2, 1)
	require.NoError(t, g.SetTiers(failedSlotTiers(true)))
	path := pathOf(g, RootNode, []int32{1, 2, 3, 4})
	for i, b := range []blocks.ID{3, 4} {
		require.NoError(t, g.Cache(b, path[i], 0))
		require.True(t, g.PrepareStore(b))
	}
	for range 2 { // into the host, then the host's copy into the disk
		for _, pl := range g.TakePlans(nil) {
			_, _, err := g.CompleteTransfer(pl.ID, true, nil)
			require.NoError(t, err)
		}
	}
	require.NoError(t, g.Uncache(3))
	require.NoError(t, g.Uncache(4))
	dst := blocks.ID(5)
	load := func() TransferID {
		ld, err := g.PrepareLoad([]GroupLoad{{Node: path[0], Dst: dst}, {Node: path[1], Dst: dst + 1}})
		require.NoError(t, err)
		dst += 2
		g.TakePlans(nil)
		return ld
	}
	fail := func(ld TransferID) {
		_, _, err := g.CompleteTransfer(ld, false, nil)
		require.NoError(t, err)
		require.NoError(t, g.CheckInvariants())
	}
	h1, h2 := load(), load() // from the host
	fail(h1)
	require.Equal(t, Tier(2), g.LowerTier(path[0], 0))
	d1, d2 := load(), load() // from the disk
	fail(d1)
	fail(h2)
	_, _, err := g.CompleteTransfer(d2, true, nil)
	require.NoError(t, err)
	require.NoError(t, g.CheckInvariants())
	for ti := Tier(1); ti <= 2; ti++ {
		require.Zero(t, g.TierStatsOf(ti).Pending)
		require.Zero(t, g.TierStatsOf(ti).Resident)
	}
}
