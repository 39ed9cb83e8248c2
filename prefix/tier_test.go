package prefix

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// mediumLog records events as "stored MEDIUM n" and "removed MEDIUM n".
type mediumLog struct{ got []string }

func medium(m string) string {
	if m == "" {
		return MediumGPU
	}
	return m
}
func (l *mediumLog) BlockStored(e *BlockStored) {
	l.got = append(l.got, fmt.Sprintf("stored %s %d", medium(e.Medium), len(e.Blocks)))
}
func (l *mediumLog) BlockRemoved(e *BlockRemoved) {
	l.got = append(l.got, fmt.Sprintf("removed %s %d", medium(e.Medium), len(e.Blocks)))
}
func (l *mediumLog) AllBlocksCleared() { l.got = append(l.got, "cleared") }

func tierIndex(t *testing.T, n int, write WritePolicy, target int, obs Observer) (*blocks.Pool, *Index) {
	t.Helper()
	opts := []Option{WithTiers(TierConfig{
		Tiers: []TierSpec{
			{Medium: MediumCPU, Capacity: 8, Write: write, Hits: 2},
			{Medium: MediumDisk, Capacity: 16, Write: WriteThrough},
		},
		BlockBytes: 1000, FreeTarget: target,
	})}
	if obs != nil {
		opts = append(opts, WithObserver(obs))
	}
	return newTestIndex(t, n, opts...)
}

func completeAll(t *testing.T, x *Index, plans []Plan, ok bool) {
	t.Helper()
	done := map[TransferID]bool{}
	for _, p := range plans {
		if !done[p.ID] {
			done[p.ID] = true
			_, err := x.CompleteTransfer(p.ID, ok)
			require.NoError(t, err)
		}
	}
	require.NoError(t, x.CheckInvariants())
}

// TestWriteBackDemotionThenPromotion: a finished prompt is demoted ahead of need below the
// watermark, in one coalesced plan; its device blocks stay unavailable until the copy is
// confirmed; the lookup then finds it in host memory, a load brings it back, and the
// events name each medium once.
func TestWriteBackDemotionThenPromotion(t *testing.T) {
	log := &mediumLog{}
	pool, x := tierIndex(t, 9, WriteBack, 8, log)
	p := Prompt{Tokens: toks(100, 13)} // 3 full blocks and a partial one
	r := admit(t, x, pool, p)
	r.finish(t, x)
	require.Equal(t, 3, x.Reclaimable())
	log.got = nil

	plans := x.TakePlans(nil)
	require.Len(t, plans, 1)
	pl := plans[0]
	require.Equal(t, Store, pl.Kind)
	require.Equal(t, Device, pl.From)
	require.Equal(t, Tier(1), pl.To)
	require.Equal(t, 3, pl.Blocks)
	require.Equal(t, int64(3000), pl.Bytes)
	require.Len(t, pl.Runs, 1, "contiguous blocks coalesce into one run")
	require.Equal(t, Run{Src: int32(r.ids[0]), Dst: 0, Blocks: 3}, pl.Runs[0])
	require.Equal(t, 0, x.Reclaimable(), "blocks awaiting demotion are unavailable")
	require.Equal(t, 3, x.TierStatsOf(Device).Pending)
	require.NoError(t, x.CheckInvariants())

	completeAll(t, x, plans, true)
	require.Equal(t, 0, x.TierStatsOf(Device).Resident, "the demoted blocks left the device")
	require.Equal(t, 3, x.TierStatsOf(1).Resident)
	require.Equal(t, []string{"stored CPU 3", "removed GPU 1", "removed GPU 1", "removed GPU 1"}, log.got,
		"the chain of three is one lower-tier event, reported before the device copies go")

	// Write-through to disk: the host copies go down in the next plan.
	plans = x.TakePlans(nil)
	require.Len(t, plans, 1)
	require.Equal(t, Tier(1), plans[0].From)
	require.Equal(t, Tier(2), plans[0].To)
	completeAll(t, x, plans, true)
	require.Equal(t, 3, x.TierStatsOf(2).Resident)

	// Lookup: nothing on the device, three blocks in host memory.
	hit, cur := x.Peek(nil, &p, LeaveOne)
	require.Empty(t, hit)
	h := x.PeekLower(&p, cur, LeaveOne, 0)
	require.Equal(t, TierHit{Blocks: [MaxTiers]int{0, 3, 0, 0}, Lower: 3}, h)

	// Promotion: device blocks for the span, a load plan, then commit.
	dst, err := pool.Allocate(nil, 3)
	require.NoError(t, err)
	id, err := x.PrepareLoad(&p, cur, LeaveOne, dst)
	require.NoError(t, err)
	plans = x.TakePlans(nil)
	require.Len(t, plans, 1)
	require.Equal(t, Load, plans[0].Kind)
	require.Equal(t, id, plans[0].ID)
	require.Equal(t, 3, plans[0].Blocks)
	log.got = nil
	completeAll(t, x, plans, true)
	_, err = x.Commit(&cur, &p, dst)
	require.NoError(t, err)
	require.Equal(t, []string{"stored GPU 3"}, log.got, "a promoted block is stored on the device once; its host copy stays, unreported")
	require.Equal(t, uint64(3), x.TierStatsOf(1).Loaded)
	require.NoError(t, x.Release(dst))
	require.NoError(t, x.CheckInvariants())

	// Evicting it again needs no copy: the host holds it.
	log.got = nil
	require.Empty(t, x.TakePlans(nil))
	require.Equal(t, []string{"removed GPU 1", "removed GPU 1", "removed GPU 1"}, log.got)
	require.Equal(t, 3, x.TierStatsOf(1).Resident)

	// Reset covers every tier.
	require.NoError(t, x.Reset())
	_, cur = x.Peek(nil, &p, LeaveOne)
	require.Equal(t, 0, x.PeekLower(&p, cur, LeaveOne, 0).Lower)
	require.Equal(t, 0, x.TierStatsOf(1).Resident)
	require.Equal(t, 0, x.TierStatsOf(2).Resident)
	require.NoError(t, x.CheckInvariants())
}

// TestFailedTransfersLeaveConsistentState: a failed demotion leaves the device block
// cached (it still holds its KV); a failed load evicts the loaded keys from their tier and
// releases the device blocks it held.
func TestFailedTransfersLeaveConsistentState(t *testing.T) {
	pool, x := tierIndex(t, 9, WriteBack, 8, nil)
	p := Prompt{Tokens: toks(7, 9)}
	admit(t, x, pool, p).finish(t, x)
	completeAll(t, x, x.TakePlans(nil), false)
	require.Equal(t, 2, x.TierStatsOf(Device).Resident)
	require.Zero(t, x.TierStatsOf(Device).Pending, "no longer being demoted")
	require.Equal(t, 0, x.TierStatsOf(1).Resident)
	require.Equal(t, uint64(2), x.TierStatsOf(1).StoreFailed)
	require.Equal(t, 6, pool.NumFree())
	require.Equal(t, 2, x.Reclaimable())
	require.Equal(t, 2, x.Evict(2))
	require.Equal(t, 8, pool.NumFree())

	admit(t, x, pool, p).finish(t, x)
	completeAll(t, x, x.TakePlans(nil), true)
	completeAll(t, x, x.TakePlans(nil), true) // host to disk, write-through
	_, cur := x.Peek(nil, &p, LeaveOne)
	dst, err := pool.Allocate(nil, 2)
	require.NoError(t, err)
	_, err = x.PrepareLoad(&p, cur, LeaveOne, dst)
	require.NoError(t, err)
	require.NoError(t, pool.Release(dst...)) // the request went away meanwhile
	require.Equal(t, 6, pool.NumFree(), "a loading block is not reused before the load completes")
	completeAll(t, x, x.TakePlans(nil), false)
	require.Equal(t, 8, pool.NumFree())
	h := x.PeekLower(&p, cur, LeaveOne, 0)
	require.Equal(t, [MaxTiers]int{0, 0, 2, 0}, h.Blocks, "the host's keys are evicted; the disk copy remains")
	require.Equal(t, uint64(2), x.TierStatsOf(1).LoadFailed)

	_, err = x.CompleteTransfer(12345, true)
	require.True(t, errors.Is(err, ErrUnknownTransfer))
}

// A failed demotion's blocks go back to the device's eviction order as blocks released
// now: the next eviction takes an older block, not the failed copies' KV (before, they
// were evicted at once, lost with no copy anywhere). vLLM frees a store's source blocks
// when its job finishes, whatever the outcome, to the free queue's tail.
func TestFailedDemotionRanksAsReleasedNow(t *testing.T) {
	pool, x := tierIndex(t, 9, WriteBack, 6, nil)
	pa, pb := Prompt{Tokens: toks(7, 9)}, Prompt{Tokens: toks(70, 9)}
	admit(t, x, pool, pa).finish(t, x)
	admit(t, x, pool, pb).finish(t, x)
	plans := x.TakePlans(nil)
	require.Len(t, plans, 1)
	require.Equal(t, 2, plans[0].Blocks, "pa's two blocks, the oldest, are demoted")
	completeAll(t, x, plans, false)
	require.Equal(t, 4, x.TierStatsOf(Device).Resident)
	require.Equal(t, 2, x.Evict(2))
	ids, _ := x.Peek(nil, &pa, LeaveOne)
	require.Len(t, ids, 2, "pa's blocks stayed, ranked as released after pb's")
	ids, _ = x.Peek(nil, &pb, LeaveOne)
	require.Empty(t, ids, "pb's were the older")
	require.NoError(t, x.CheckInvariants())
}

// TestWritePolicies: write-through copies at commit, selective write-through after N hits.
func TestWritePolicies(t *testing.T) {
	pool, x := tierIndex(t, 9, WriteThrough, 0, nil)
	r := admit(t, x, pool, Prompt{Tokens: toks(1, 9)})
	plans := x.TakePlans(nil)
	require.Len(t, plans, 1)
	require.Equal(t, 2, plans[0].Blocks)
	completeAll(t, x, plans, true)
	r.finish(t, x)
	require.Equal(t, 2, x.TierStatsOf(1).Resident)

	pool, x = tierIndex(t, 9, WriteAfterHits, 0, nil)
	p := Prompt{Tokens: toks(1, 9)}
	admit(t, x, pool, p).finish(t, x)
	require.Empty(t, x.TakePlans(nil), "one hit (the commit) is below the threshold of 2")
	r = admit(t, x, pool, p) // the second use hits the blocks
	plans = x.TakePlans(nil)
	require.Len(t, plans, 1)
	require.Equal(t, 2, plans[0].Blocks)
	completeAll(t, x, plans, true)
	r.finish(t, x)
}

// TestEpochCoversLowerTiers: after a weight-epoch bump the namespace's lower-tier blocks
// are unreachable at once.
func TestEpochCoversLowerTiers(t *testing.T) {
	pool, x := tierIndex(t, 9, WriteBack, 8, nil)
	p := Prompt{Namespace: Namespace{Salt: "a"}, Tokens: toks(3, 9)}
	admit(t, x, pool, p).finish(t, x)
	completeAll(t, x, x.TakePlans(nil), true)
	_, cur := x.Peek(nil, &p, LeaveOne)
	require.Equal(t, 2, x.PeekLower(&p, cur, LeaveOne, 0).Lower)
	x.BumpEpoch(p.Namespace)
	_, cur = x.Peek(nil, &p, LeaveOne)
	require.Equal(t, 0, x.PeekLower(&p, cur, LeaveOne, 0).Lower)
}

func TestTierConfigValidation(t *testing.T) {
	for _, c := range []TierConfig{
		{},
		{Tiers: []TierSpec{{Capacity: 0}}},
		{Tiers: []TierSpec{{Capacity: 4, Write: WriteAfterHits}}},
		{Tiers: []TierSpec{{Capacity: 4}}, BlockBytes: -1},
		{Tiers: []TierSpec{{Capacity: 4}}, BlockBytes: math.MaxInt64 / 2}, // Bytes of a 4-block plan wraps
		{Tiers: []TierSpec{{Capacity: 1}, {Capacity: 1}, {Capacity: 1}, {Capacity: 1}}},
	} {
		pool, err := blocks.New(4)
		require.NoError(t, err)
		_, err = New(pool, 4, WithTiers(c))
		require.ErrorIs(t, err, ErrInvalidArgument, "%+v", c)
	}
}

// TestTierBadInput: each transfer call's bad input fails with its sentinel and changes
// nothing.
func TestTierBadInput(t *testing.T) {
	pool, plain := newTestIndex(t, 9)
	p := Prompt{Tokens: toks(1, 9)}
	_, err := plain.PrepareLoad(&p, Cursor{}, LeaveOne, nil)
	require.ErrorIs(t, err, ErrNoTiers)
	_, err = plain.CompleteTransfer(1, true)
	require.ErrorIs(t, err, ErrNoTiers)
	require.Empty(t, plain.TakePlans(nil))
	_ = pool

	pool, x := tierIndex(t, 9, WriteBack, 8, nil)
	admit(t, x, pool, p).finish(t, x)
	completeAll(t, x, x.TakePlans(nil), true)
	_, cur := x.Peek(nil, &p, LeaveOne)
	free := pool.NumFree()
	held, err := pool.Allocate(nil, 3)
	require.NoError(t, err)
	before, pending := x.TierStatsOf(1), x.PendingTransfers()
	for name, c := range map[string]struct {
		dst  []blocks.ID
		want error
	}{
		"a free block":             {[]blocks.ID{blocks.ID(8)}, ErrNotHeld},
		"an unknown block":         {[]blocks.ID{99}, ErrNotHeld},
		"more than the tiers hold": {held, ErrNotCached},
		"nothing":                  {nil, ErrInvalidArgument},
		"a block named twice":      {[]blocks.ID{held[0], held[0]}, ErrInvalidArgument},
		"a bad block after good":   {[]blocks.ID{held[0], 99}, ErrNotHeld},
	} {
		if name == "a free block" {
			require.Zero(t, pool.RefCount(8), "block 8 is free")
		}
		_, err := x.PrepareLoad(&p, cur, LeaveOne, c.dst)
		require.ErrorIs(t, err, c.want, name)
		require.Equal(t, before, x.TierStatsOf(1), name)
		require.Equal(t, pending, x.PendingTransfers(), name)
		require.NoError(t, x.CheckInvariants(), name)
		for _, id := range held {
			require.Equal(t, 1, pool.RefCount(id), name)
			require.Zero(t, x.TransferRefs(id), name)
		}
	}
	// A block already the destination of a load in flight cannot be another's.
	id, err := x.PrepareLoad(&p, cur, LeaveOne, held[:2])
	require.NoError(t, err)
	_, err = x.PrepareLoad(&p, cur, LeaveOne, held[1:3])
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Equal(t, 1, x.TransferRefs(held[1]))
	_, err = x.CompleteTransfer(id, false)
	require.NoError(t, err)
	require.NoError(t, x.CheckInvariants())
	require.NoError(t, pool.Release(held...))
	require.Equal(t, free, pool.NumFree())
}

// TestCompleteBeforeTakePlans: a load completed (cancelled) before TakePlans handed it out
// is never handed out, even once its record is reused by the next transfer.
func TestCompleteBeforeTakePlans(t *testing.T) {
	pool, x := tierIndex(t, 9, WriteBack, 8, nil)
	p := Prompt{Tokens: toks(1, 9)}
	admit(t, x, pool, p).finish(t, x)
	completeAll(t, x, x.TakePlans(nil), true)
	_, cur := x.Peek(nil, &p, LeaveOne)
	free := pool.NumFree()
	held, err := pool.Allocate(nil, 2)
	require.NoError(t, err)
	first, err := x.PrepareLoad(&p, cur, LeaveOne, held[:1])
	require.NoError(t, err)
	_, err = x.CompleteTransfer(first, false)
	require.NoError(t, err)
	// The failed load evicted its key from tier 1; the disk copy, if any, is found next.
	_, cur = x.Peek(nil, &p, LeaveOne)
	loads := 0
	var second TransferID
	if x.PeekLower(&p, cur, LeaveOne, 1).Lower == 1 {
		second, err = x.PrepareLoad(&p, cur, LeaveOne, held[1:2])
		require.NoError(t, err)
		loads = 1
	}
	plans := x.TakePlans(nil)
	got := 0
	for _, pl := range plans {
		require.NotEqual(t, first, pl.ID, "a cancelled load was handed out")
		if pl.Kind == Load {
			require.Equal(t, second, pl.ID)
			got++
		}
	}
	require.Equal(t, loads, got)
	completeAll(t, x, plans, true)
	require.Zero(t, x.PendingTransfers())
	require.NoError(t, x.CheckInvariants())
	require.NoError(t, pool.Release(held...))
	require.Equal(t, free, pool.NumFree())
}
