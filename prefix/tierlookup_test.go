package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/stretchr/testify/require"
)

// demotedIndex is a tiered index whose host and disk tiers hold p's three full blocks,
// whose device holds none of them, and which has no transfer in flight.
func demotedIndex(t *testing.T) (*blocks.Pool, *Index, Prompt) {
	t.Helper()
	pool, x := tierIndex(t, 9, WriteBack, 8, nil)
	p := Prompt{Tokens: toks(100, 13)}
	admit(t, x, pool, p).finish(t, x)
	for plans := x.TakePlans(nil); len(plans) > 0; plans = x.TakePlans(nil) {
		completeAll(t, x, plans, true)
	}
	require.Equal(t, 3, x.TierStatsOf(2).Resident)
	hit, _ := x.Peek(nil, &p, LeaveOne)
	require.Empty(t, hit)
	return pool, x, p
}

// TestPrepareLoadTakesPeekLowersWalk: PrepareLoad right after PeekLower of the same prompt,
// cursor and limit takes the walk PeekLower kept (one walk an admission), and prepares
// the same load a fresh walk does.
func TestPrepareLoadTakesPeekLowersWalk(t *testing.T) {
	pool, x, p := demotedIndex(t)
	_, cur := x.Peek(nil, &p, LeaveOne)
	require.Equal(t, 3, x.PeekLower(&p, cur, LeaveOne, 0).Lower)
	require.True(t, x.validLowerPeek(&p, cur, LeaveOne, 3))
	require.False(t, x.validLowerPeek(&p, cur, LeaveOne, 4), "more blocks than the walk found")
	require.False(t, x.validLowerPeek(&p, cur, WholePrompt, 3), "another limit")
	other := Prompt{Tokens: append([]int32(nil), p.Tokens...)}
	require.False(t, x.validLowerPeek(&other, cur, LeaveOne, 3), "another prompt, even with the same tokens")

	dst, err := pool.Allocate(nil, 3)
	require.NoError(t, err)
	id, err := x.PrepareLoad(&p, cur, LeaveOne, dst)
	require.NoError(t, err)
	require.False(t, x.validLowerPeek(&p, cur, LeaveOne, 3), "PrepareLoad consumes the kept walk")
	plans := x.TakePlans(nil)
	require.Len(t, plans, 1)
	require.Equal(t, Plan{ID: id, Kind: Load, From: 1, To: Device, Blocks: 3, Bytes: 3000, Runs: []Run{{Src: 0, Dst: int32(dst[0]), Blocks: 3}}}, plans[0])
	completeAll(t, x, plans, true)
	require.NoError(t, pool.Release(dst...))
	require.NoError(t, x.CheckInvariants())
}

// TestPrepareLoadRefusesAStaleWalk: whatever changed since PeekLower (the prompt's tokens
// in place, the entries, the namespace's epoch, the cursor's prompt), PrepareLoad walks
// again and answers as a fresh walk does: here ErrNotCached, changing nothing.
func TestPrepareLoadRefusesAStaleWalk(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, x *Index, p *Prompt)
		found  int // blocks a fresh walk finds
	}{
		{"tokens changed in place", func(_ *testing.T, _ *Index, p *Prompt) { p.Tokens[5]++ }, 1},
		{"reset", func(t *testing.T, x *Index, _ *Prompt) { require.NoError(t, x.Reset()) }, 0},
		{"epoch bumped", func(_ *testing.T, x *Index, p *Prompt) { x.BumpEpoch(p.Namespace) }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool, x, p := demotedIndex(t)
			_, cur := x.Peek(nil, &p, LeaveOne)
			require.Equal(t, 3, x.PeekLower(&p, cur, LeaveOne, 0).Lower)
			c.change(t, x, &p)
			dst, err := pool.Allocate(nil, 3)
			require.NoError(t, err)
			free := pool.NumFree()
			_, err = x.PrepareLoad(&p, cur, LeaveOne, dst)
			require.ErrorIs(t, err, ErrNotCached)
			require.ErrorContains(t, err, []string{"0 of 3", "1 of 3"}[c.found])
			require.Zero(t, x.PendingTransfers())
			require.Equal(t, free, pool.NumFree())
			for _, id := range dst {
				require.Equal(t, 1, pool.RefCount(id))
			}
			require.NoError(t, pool.Release(dst...))
			require.NoError(t, x.CheckInvariants())
		})
	}
}

// TestPrepareLoadWalksAgainForAnotherPrompt: a PrepareLoad whose prompt is not the one
// PeekLower walked (a copy of its tokens) walks again and prepares the same load.
func TestPrepareLoadWalksAgainForAnotherPrompt(t *testing.T) {
	pool, x, p := demotedIndex(t)
	_, cur := x.Peek(nil, &p, LeaveOne)
	require.Equal(t, 3, x.PeekLower(&p, cur, LeaveOne, 0).Lower)
	other := Prompt{Tokens: append([]int32(nil), p.Tokens...)}
	dst, err := pool.Allocate(nil, 2)
	require.NoError(t, err)
	_, err = x.PrepareLoad(&other, cur, LeaveOne, dst)
	require.NoError(t, err)
	plans := x.TakePlans(nil)
	require.Len(t, plans, 1)
	require.Equal(t, 2, plans[0].Blocks)
	completeAll(t, x, plans, true)
	require.NoError(t, pool.Release(dst...))
}

// TestTierLoadAllocatesNothing: an admission's whole lower-tier path in steady state, the
// lookup (Peek, PeekLower), the load's preparation (PrepareLoad), its plan (TakePlans) and
// its completion (CompleteTransfer), allocates nothing.
func TestTierLoadAllocatesNothing(t *testing.T) {
	if invariant.Enabled {
		t.Skip("invariant checks allocate")
	}
	pool, x, p := demotedIndex(t)
	var hit []blocks.ID
	dst := make([]blocks.ID, 0, 3)
	plans := make([]Plan, 0, 4)
	loaded := 0
	cycle := func() {
		var cur Cursor
		hit, cur = x.Peek(hit[:0], &p, LeaveOne)
		h := x.PeekLower(&p, cur, LeaveOne, 0)
		var err error
		if dst, err = pool.Allocate(dst[:0], h.Lower); err != nil {
			panic(err)
		}
		id, err := x.PrepareLoad(&p, cur, LeaveOne, dst)
		if err != nil {
			panic(err)
		}
		plans = x.TakePlans(plans[:0])
		if _, err := x.CompleteTransfer(id, true); err != nil {
			panic(err)
		}
		if err := pool.Release(dst...); err != nil {
			panic(err)
		}
		loaded += len(dst)
	}
	cycle()
	allocs := testing.AllocsPerRun(200, cycle)
	require.Equal(t, 3*202, loaded, "every cycle must load the three blocks for the test to mean anything")
	require.Zero(t, allocs, "the lower-tier lookup, load and plan allocated")
	require.NoError(t, x.CheckInvariants())
}

// BenchmarkTierLoad is TestTierLoadAllocatesNothing's cycle, 3 blocks loaded from the host.
func BenchmarkTierLoad(b *testing.B) {
	pool, err := blocks.New(9, blocks.WithNullBlock())
	require.NoError(b, err)
	x, err := New(pool, testBS, WithTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 8, Write: WriteBack}}, BlockBytes: 1000, FreeTarget: 8}))
	require.NoError(b, err)
	p := Prompt{Tokens: toks(100, 13)}
	admit(b, x, pool, p).finish(b, x)
	for _, pl := range x.TakePlans(nil) {
		_, err := x.CompleteTransfer(pl.ID, true)
		require.NoError(b, err)
	}
	var hit []blocks.ID
	dst := make([]blocks.ID, 0, 3)
	plans := make([]Plan, 0, 4)
	b.ReportAllocs()
	for b.Loop() {
		var cur Cursor
		hit, cur = x.Peek(hit[:0], &p, LeaveOne)
		h := x.PeekLower(&p, cur, LeaveOne, 0)
		if dst, err = pool.Allocate(dst[:0], h.Lower); err != nil || len(dst) != 3 {
			b.Fatal(err, len(dst))
		}
		id, err := x.PrepareLoad(&p, cur, LeaveOne, dst)
		if err != nil {
			b.Fatal(err)
		}
		plans = x.TakePlans(plans[:0])
		if _, err := x.CompleteTransfer(id, true); err != nil {
			b.Fatal(err)
		}
		if err := pool.Release(dst...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(3*b.N), "ns/block")
}
