package prefix

import (
	"slices"
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
	require.Equal(t, TransferResult{Kind: Store, From: Device, To: 1, Blocks: 2, OK: true, Sources: [MaxTiers]int{Device: 2}}, res)
	require.Equal(t, []blocks.ID{3, 4}, dev)
	require.Equal(t, Tier(1), g.LowerTier(path[1], 0))
	require.NoError(t, g.Uncache(4))
	require.NoError(t, g.Uncache(3))
	require.True(t, g.IsLive(path[1]), "the host keeps the node")
	require.Equal(t, []string{"", "", "CPU"}, rec.stored, "the host's chain of two blocks is one event")
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
	require.Equal(t, []string{"", "", "CPU"}, rec.removed, "the failed load's keys leave the host in one event")
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
	// A load of a host prefix continued on disk names both tiers it read.
	id, err := g.PrepareLoad([]GroupLoad{{Node: path[0], Group: 1, Dst: 5}, {Node: path[1], Group: 1, Dst: 6}})
	require.NoError(t, err)
	p = g.TakePlans(p[:0])
	require.Len(t, p, 2, "one plan per source tier")
	res, dev, err := g.CompleteTransfer(id, true, nil)
	require.NoError(t, err)
	require.Equal(t, []blocks.ID{6, 5}, dev)
	require.Equal(t, TransferResult{Kind: Load, From: 1, To: Device, Blocks: 2, OK: true, Sources: [MaxTiers]int{1: 1, 2: 1}}, res)
	require.NoError(t, g.CheckInvariants())
	require.ErrorIs(t, g.Clear(), nil)
	require.False(t, g.IsLive(path[1]), "Clear covers every tier")
	require.Equal(t, 0, g.TierStatsOf(1).Resident+g.TierStatsOf(2).Resident)
	require.NoError(t, g.CheckInvariants())
}

// fullRec records every event whole.
type fullRec struct {
	stored  []BlockStored
	removed []BlockRemoved
}

func (r *fullRec) BlockStored(e *BlockStored) {
	c := *e
	c.Hashes, c.Parent = append([]byte(nil), e.Hashes...), append([]byte(nil), e.Parent...)
	c.Blocks, c.Tokens = append([]blocks.ID(nil), e.Blocks...), append([]int32(nil), e.Tokens...)
	r.stored = append(r.stored, c)
}

func (r *fullRec) BlockRemoved(e *BlockRemoved) {
	c := *e
	c.Hashes, c.Blocks = append([]byte(nil), e.Hashes...), append([]blocks.ID(nil), e.Blocks...)
	r.removed = append(r.removed, c)
}

func (r *fullRec) AllBlocksCleared() {}

// The lower tiers' events batch each chain of one group's blocks a completed transfer
// moves, as the device's batch a chain cached at once: for a group of one unit a block
// and one of two units, the host reports each group's chain in one BlockStored with the
// device's hashes, parent and tokens, and the blocks leaving it (a failed load) in one
// BlockRemoved per group; a batch the owner opens (BatchTierEvents) collects the slots
// its stores drop to make room.
func TestGroupTreeTierEventsBatchChains(t *testing.T) {
	g := newTestTree(t, 16, 2, 2)
	rec := &fullRec{}
	require.NoError(t, g.SetObserver(rec, nil, []int{1, 2}))
	require.NoError(t, g.SetTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 6}}, BlockBytes: 100}))
	path := pathOf(g, RootNode, []int32{1, 2, 3, 4, 5, 6, 7, 8})
	g0 := []blocks.ID{1, 2, 3, 4}
	require.NoError(t, g.CacheChain(0, g0, path, 1))
	require.NoError(t, g.CacheChain(1, []blocks.ID{5, 6}, path, 2))
	require.Len(t, rec.stored, 2, "the device's chains")
	dev := slices.Clone(rec.stored)
	for b := blocks.ID(1); b <= 6; b++ {
		require.True(t, g.PrepareStore(b))
	}
	plans := g.TakePlans(nil)
	for _, p := range plans {
		_, _, err := g.CompleteTransfer(p.ID, true, nil)
		require.NoError(t, err)
	}
	host := rec.stored[2:]
	require.Len(t, host, 2, "one event per group's chain")
	for i, e := range host {
		require.Equal(t, MediumCPU, e.Medium)
		require.Equal(t, dev[i].Group, e.Group)
		require.Equal(t, dev[i].Hashes, e.Hashes)
		require.Equal(t, dev[i].Parent, e.Parent)
		require.Equal(t, dev[i].Tokens, e.Tokens)
		require.Equal(t, dev[i].BlockSize, e.BlockSize)
		require.Len(t, e.Blocks, len(dev[i].Blocks))
	}
	for b := blocks.ID(1); b <= 6; b++ {
		require.NoError(t, g.Uncache(b))
	}
	rec.removed = nil
	var lds []GroupLoad
	for i, n := range path {
		lds = append(lds, GroupLoad{Node: n, Group: 0, Dst: blocks.ID(7 + i)})
	}
	lds = append(lds, GroupLoad{Node: path[1], Group: 1, Dst: 11}, GroupLoad{Node: path[3], Group: 1, Dst: 12})
	id, err := g.PrepareLoad(lds)
	require.NoError(t, err)
	g.TakePlans(plans[:0])
	_, _, err = g.CompleteTransfer(id, false, nil)
	require.NoError(t, err)
	require.Len(t, rec.removed, 2, "the failed load's keys: one event per group")
	for i, e := range rec.removed {
		require.Equal(t, MediumCPU, e.Medium)
		require.Equal(t, dev[i].Group, e.Group)
		require.ElementsMatch(t, chunks(dev[i].Hashes, 8), chunks(e.Hashes, 8))
	}
	require.Zero(t, g.TierStatsOf(1).Resident)
	require.NoError(t, g.CheckInvariants())

	// Stores the owner prepares in one batch drop the host's victims in one event.
	path2 := pathOf(g, RootNode, []int32{9, 9, 8, 8, 7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2})
	for i, n := range path2 {
		require.NoError(t, g.Cache(blocks.ID(1+i), n, 0))
	}
	for b := blocks.ID(1); b <= 6; b++ {
		require.True(t, g.PrepareStore(b))
	}
	for _, p := range g.TakePlans(nil) {
		_, _, err := g.CompleteTransfer(p.ID, true, nil)
		require.NoError(t, err)
	}
	for b := blocks.ID(1); b <= 6; b++ {
		require.NoError(t, g.Uncache(b))
	}
	rec.removed = nil
	g.BatchTierEvents()
	require.True(t, g.PrepareStore(7), "the full host drops a victim")
	require.True(t, g.PrepareStore(8), "and another")
	require.Empty(t, rec.removed, "collected until the batch ends")
	g.FlushTierEvents()
	require.Len(t, rec.removed, 1)
	require.Len(t, rec.removed[0].Blocks, 2)
	require.Equal(t, MediumCPU, rec.removed[0].Medium)
	require.NoError(t, g.CheckInvariants())
}

func chunks(b []byte, n int) [][]byte {
	var out [][]byte
	for len(b) >= n {
		out, b = append(out, b[:n]), b[n:]
	}
	return out
}
