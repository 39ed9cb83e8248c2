package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

func newTieredTree(t *testing.T, numBlocks int, specs ...TierSpec) *GroupTree {
	t.Helper()
	g := newTestTree(t, numBlocks, 2, 2)
	require.NoError(t, g.SetTiers(TierConfig{Tiers: specs, BlockBytes: 100}))
	return g
}

type tierRec struct{ stored, removed []string }

func (r *tierRec) BlockStored(e *BlockStored)   { r.stored = append(r.stored, e.Medium) }
func (r *tierRec) BlockRemoved(e *BlockRemoved) { r.removed = append(r.removed, e.Medium) }
func (r *tierRec) AllBlocksCleared()            { r.removed = append(r.removed, "all") }

// A device block stored into the host stays findable there after the device evicts it:
// the node stays, the plan is one coalesced run with its bytes, and a load pins the slot
// until it completes.
func TestGroupTreeTierStoreEvictLoad(t *testing.T) {
	g := newTestTree(t, 10, 2, 2)
	rec := &tierRec{}
	require.NoError(t, g.SetObserver(rec, nil, []int{1, 1}))
	require.NoError(t, g.SetTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 4}}, BlockBytes: 100}))
	path := pathOf(g, RootNode, []int32{1, 2, 3, 4})
	require.NoError(t, g.Cache(3, path[0], 0))
	require.NoError(t, g.Cache(4, path[1], 0))
	require.True(t, g.PrepareStore(3))
	require.True(t, g.PrepareStore(4))
	require.False(t, g.PrepareStore(4), "a second store of one entry")
	require.Equal(t, 1, g.TransferRefs(3))
	plans := g.TakePlans(nil)
	require.Len(t, plans, 1)
	require.Equal(t, []Run{{Src: 3, Dst: 0, Blocks: 2}}, plans[0].Runs)
	require.Equal(t, int64(200), plans[0].Bytes)
	require.NoError(t, g.CheckInvariants())
	require.Equal(t, Device, g.LowerTier(path[0], 0), "not resident before the copy is confirmed")
	res, dev, err := g.CompleteTransfer(plans[0].ID, true, nil)
	require.NoError(t, err)
	require.Equal(t, TransferResult{Kind: Store, From: Device, To: 1, Blocks: 2, OK: true}, res)
	require.Equal(t, []blocks.ID{3, 4}, dev)
	require.Equal(t, Tier(1), g.LowerTier(path[1], 0))
	require.NoError(t, g.Uncache(4))
	require.NoError(t, g.Uncache(3))
	require.True(t, g.IsLive(path[1]), "the host keeps the node")
	require.Equal(t, []string{"", "", "CPU", "CPU"}, rec.stored)
	require.Equal(t, []string{"", ""}, rec.removed)
	id, err := g.PrepareLoad([]GroupLoad{{Node: path[0], Group: 0, Dst: 7}, {Node: path[1], Group: 0, Dst: 8}})
	require.NoError(t, err)
	_, err = g.PrepareLoad([]GroupLoad{{Node: path[0], Group: 1, Dst: 9}})
	require.ErrorIs(t, err, ErrNotCached)
	_, err = g.PrepareLoad([]GroupLoad{{Node: path[0], Group: 0, Dst: 7}})
	require.ErrorIs(t, err, ErrInvalidArgument, "a destination already loading")
	plans = g.TakePlans(plans[:0])
	require.Equal(t, []Run{{Src: 0, Dst: 7, Blocks: 2}}, plans[0].Runs)
	require.NoError(t, g.CheckInvariants())
	_, dev, err = g.CompleteTransfer(id, false, dev[:0])
	require.NoError(t, err)
	require.Equal(t, []blocks.ID{7, 8}, dev)
	require.Equal(t, Device, g.LowerTier(path[0], 0), "a failed load evicts the keys")
	require.False(t, g.IsLive(path[0]), "and the nodes nothing keeps")
	require.Equal(t, uint64(2), g.TierStatsOf(1).LoadFailed)
	require.NoError(t, g.CheckInvariants())
}

// A full host writes its victim back to the disk below it; the disk's copy keeps the node.
func TestGroupTreeTierWriteBackDown(t *testing.T) {
	g := newTieredTree(t, 10, TierSpec{Medium: MediumCPU, Capacity: 1}, TierSpec{Medium: MediumDisk, Capacity: 2})
	path := pathOf(g, RootNode, []int32{1, 2, 3, 4})
	for i, n := range path {
		require.NoError(t, g.Cache(blocks.ID(1+i), n, 1))
	}
	require.True(t, g.PrepareStore(1))
	p := g.TakePlans(nil)
	_, _, err := g.CompleteTransfer(p[0].ID, true, nil)
	require.NoError(t, err)
	require.False(t, g.PrepareStore(2), "no host slot free until its victim reaches the disk")
	p = g.TakePlans(p[:0])
	require.Len(t, p, 1)
	require.Equal(t, Tier(1), p[0].From)
	require.Equal(t, Tier(2), p[0].To)
	require.NoError(t, g.CheckInvariants())
	require.Equal(t, Tier(1), g.LowerTier(path[0], 1), "a block leaving by write-back still serves loads")
	_, _, err = g.CompleteTransfer(p[0].ID, true, nil)
	require.NoError(t, err)
	require.True(t, g.PrepareStore(2))
	p = g.TakePlans(p[:0])
	_, _, err = g.CompleteTransfer(p[0].ID, true, nil)
	require.NoError(t, err)
	require.Equal(t, Tier(2), g.LowerTier(path[0], 1))
	require.Equal(t, Tier(1), g.LowerTier(path[1], 1))
	require.NoError(t, g.Uncache(1))
	require.NoError(t, g.Uncache(2))
	require.True(t, g.IsLive(path[0]))
	require.NoError(t, g.CheckInvariants())
	require.ErrorIs(t, g.Clear(), nil)
	require.False(t, g.IsLive(path[1]), "Clear covers every tier")
	require.Equal(t, 0, g.TierStatsOf(1).Resident+g.TierStatsOf(2).Resident)
	require.NoError(t, g.CheckInvariants())
}

func TestGroupTreeSetTiersRefusals(t *testing.T) {
	g := newTestTree(t, 10, 2, 1)
	for name, c := range map[string]TierConfig{
		"no tiers":    {},
		"zero slots":  {Tiers: []TierSpec{{Capacity: 0}}},
		"hits of 0":   {Tiers: []TierSpec{{Capacity: 2, Write: WriteAfterHits}}},
		"huge blocks": {Tiers: []TierSpec{{Capacity: 2}}, BlockBytes: 1 << 62},
	} {
		require.Error(t, g.SetTiers(c), name)
	}
	g.Ensure(RootNode, []int32{1, 2})
	require.ErrorIs(t, g.SetTiers(TierConfig{Tiers: []TierSpec{{Capacity: 2}}}), ErrInvalidArgument)
}
