package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// newTieredStack is newStack with a host tier of host blocks (write-back) and a disk tier,
// demoting ahead of need below target free device blocks.
func newTieredStack(t *testing.T, usable, bs, host, target int) *stack {
	t.Helper()
	pool := newPool(t, usable+1)
	clock := &evict.Counter{}
	idx, err := prefix.New(pool, bs, prefix.WithClock(clock), prefix.WithTiers(prefix.TierConfig{
		Tiers: []prefix.TierSpec{
			{Medium: prefix.MediumCPU, Capacity: host},
			{Medium: prefix.MediumDisk, Capacity: 2 * host, Write: prefix.WriteThrough},
		},
		BlockBytes: 64 << 10, FreeTarget: target,
	}))
	require.NoError(t, err)
	m, err := New(Config{Pool: pool, Index: idx, BlockSize: bs, Clock: clock})
	require.NoError(t, err)
	return &stack{m: m, pool: pool, idx: idx}
}

func (s *stack) completeAll(t *testing.T, ok bool) []LoadDone {
	t.Helper()
	var out []LoadDone
	seen := map[prefix.TransferID]bool{}
	for _, p := range s.m.TakePlans(nil) {
		if seen[p.ID] {
			continue
		}
		seen[p.ID] = true
		d, err := s.m.CompleteTransfer(p.ID, ok)
		require.NoError(t, err)
		out = append(out, d)
	}
	require.NoError(t, s.m.CheckInvariants())
	return out
}

func prompt(base int32, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = base + int32(i)
	}
	return p
}

// TestManagerPromotesFromHost: a prompt demoted to host memory is found there at the next
// admission, loaded into the sequence's own blocks and committed once the load completes.
func TestManagerPromotesFromHost(t *testing.T) {
	s := newTieredStack(t, 8, 4, 8, 8)
	req := &Request{Prompt: prompt(10, 17)} // 4 full blocks and one token
	_, err := s.m.Admit(1, req)
	require.NoError(t, err)
	require.NoError(t, s.m.Finish(1))
	s.completeAll(t, true) // demote the 4 blocks to host
	s.completeAll(t, true) // host to disk, write-through
	require.Equal(t, 0, s.m.Stats().Cached)

	res, err := s.m.Admit(2, req)
	require.NoError(t, err)
	require.Equal(t, 0, res.HitTokens)
	require.Equal(t, 16, res.LoadTokens)
	require.NotZero(t, res.Load)
	require.Equal(t, [prefix.MaxTiers]int{0, 4, 0, 0}, res.Tiers.Blocks)
	require.Equal(t, 0, s.m.Stats().Cached, "loading blocks are not committed")
	done := s.completeAll(t, true)
	require.Len(t, done, 1)
	require.True(t, done[0].Loaded)
	require.Equal(t, SeqID(2), done[0].Seq)
	require.Zero(t, done[0].ComputeTokens)
	require.Equal(t, 4, s.m.Stats().Cached, "loaded blocks are committed")
	require.Equal(t, uint64(16), s.m.Stats().LoadedTokens)
	require.InDelta(t, 16.0/34, s.m.Stats().TieredHitRate(), 1e-9)
	s.done(t)
}

// TestManagerFailedLoadFallsBack: a failed load leaves the sequence its blocks to compute,
// evicts the host keys, and leaks nothing; a sequence aborted mid-load leaks nothing.
func TestManagerFailedLoadFallsBack(t *testing.T) {
	s := newTieredStack(t, 8, 4, 8, 8)
	req := &Request{Prompt: prompt(10, 17)}
	_, err := s.m.Admit(1, req)
	require.NoError(t, err)
	require.NoError(t, s.m.Finish(1))
	s.completeAll(t, true)
	res, err := s.m.Admit(2, req)
	require.NoError(t, err)
	require.Equal(t, 16, res.LoadTokens)
	done := s.completeAll(t, false) // the host-to-disk copies fail too
	require.Len(t, done, 2)
	require.False(t, done[0].Loaded)
	require.Equal(t, 16, done[1].ComputeTokens)
	require.Equal(t, uint64(16), s.m.Stats().LoadFailedTokens)
	require.Equal(t, 4, s.m.Stats().Cached, "the computed blocks are committed as admission would")
	require.Equal(t, 0, s.idx.TierStatsOf(1).Resident, "the failed keys left the host")
	require.Equal(t, 0, s.idx.TierStatsOf(2).Resident)
	require.NoError(t, s.m.Finish(2))

	// Abort mid-load: the blocks stay allocated until the load completes, then return.
	s.completeAll(t, true)
	s.completeAll(t, true)
	res, err = s.m.Admit(3, req)
	require.NoError(t, err)
	require.Positive(t, res.LoadTokens)
	require.NoError(t, s.m.Abort(3))
	require.NoError(t, s.m.CheckInvariants())
	require.Less(t, s.pool.NumFree(), 8)
	require.Error(t, s.idx.Reset(), "Reset refuses while a transfer is in flight")
	s.completeAll(t, true)
	s.done(t)
	requireNoLeak(t, s.pool)
	_ = blocks.ID(0)
}

// TestSwapIntoTiers: Swap preemption holds the victim's blocks in the tiers, copying them
// through the tiers' plans, and Resume loads them back; nothing leaks.
func TestSwapIntoTiers(t *testing.T) {
	s := newTieredStack(t, 12, 4, 8, 0)
	_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 13)})
	require.NoError(t, err)
	for i := range 5 {
		_, err := s.m.Append(1, []int32{int32(500 + i)}, 0)
		require.NoError(t, err)
	}
	before, _ := s.m.Seq(1)
	got, err := s.m.Preempt(PreemptRequest{Need: 1, Mode: Swap}, nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, 1, got[0].Freed, "the partial block")
	require.Equal(t, 4, got[0].Awaiting, "the 4 full blocks await their copy")
	info, _ := s.m.Seq(1)
	require.Equal(t, Swapped, info.State)
	plans := s.m.TakePlans(nil)
	require.Len(t, plans, 1)
	require.Equal(t, prefix.Store, plans[0].Kind)
	require.Equal(t, 4, plans[0].Blocks, "its 4 full blocks (18 tokens)")
	_, err = s.m.CompleteTransfer(plans[0].ID, true)
	require.NoError(t, err)
	require.Equal(t, 0, s.m.Stats().Cached, "demoted blocks left the device")
	require.Equal(t, 12, s.pool.NumFree())

	res, err := s.m.Resume(1)
	require.NoError(t, err)
	require.Equal(t, 16, res.LoadTokens)
	require.Equal(t, 18, res.Tokens)
	s.completeAll(t, true)
	info, _ = s.m.Seq(1)
	require.Equal(t, Running, info.State)
	require.Equal(t, before.Tokens, info.Tokens)
	require.Equal(t, 4, info.Committed)
	_, err = s.m.Resume(1)
	require.ErrorIs(t, err, ErrNotRunning)
	_, err = s.m.Resume(99)
	require.ErrorIs(t, err, ErrUnknownSeq)
	_, err = s.m.CompleteTransfer(12345, true)
	require.ErrorIs(t, err, prefix.ErrUnknownTransfer)
	s.done(t)
}

// A copy to or from a lower tier holds a pool reference on one block without its
// ancestors, so while one is in flight the cost policy's Freeable is planned, not
// counted by binary search (freeable.go); once the copies complete the shortcut is back,
// and CheckInvariants compares it with the plan for every running sequence.
func TestManagerSoleFreeableWaitsForTransfers(t *testing.T) {
	pool := newPool(t, 17)
	clock := &evict.Counter{}
	idx, err := prefix.New(pool, 4, prefix.WithClock(clock), prefix.WithTiers(prefix.TierConfig{
		Tiers:      []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 16, Write: prefix.WriteThrough}},
		BlockBytes: 64 << 10,
	}))
	require.NoError(t, err)
	m, err := New(Config{Pool: pool, Index: idx, BlockSize: 4, Clock: clock, Preemption: evict.NewCostPreemption()})
	require.NoError(t, err)
	s := &stack{m: m, pool: pool, idx: idx}
	_, err = m.Admit(1, &Request{Prompt: prompt(10, 17)})
	require.NoError(t, err)
	require.Positive(t, idx.PendingTransfers(), "write-through stores of the committed blocks")
	require.False(t, m.soleFreeable())
	require.NoError(t, m.CheckInvariants())
	s.completeAll(t, true)
	require.Zero(t, idx.PendingTransfers())
	require.True(t, m.soleFreeable())
	require.Equal(t, m.freeable(m.seqs[1]), m.soleHeld(m.seqs[1]))
	out, err := m.Preempt(PreemptRequest{Need: 1}, nil)
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.NoError(t, m.CheckInvariants())
}

// Preempt's count in Swap mode: Need is met by Freed + Awaiting, what the victims' release
// frees at once plus what their demotions free. Without StreamOrdered the Awaiting blocks
// become available when the copies are confirmed; with it, as soon as TakePlans hands
// their plans out. One block more than the victims free is refused, changing nothing.
func TestSwapPreemptCountsAwaiting(t *testing.T) {
	for _, stream := range []bool{false, true} {
		pool := newPool(t, 13)
		clock := &evict.Counter{}
		idx, err := prefix.New(pool, 4, prefix.WithClock(clock), prefix.WithTiers(prefix.TierConfig{
			Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 8}}, BlockBytes: 1, StreamOrdered: stream,
		}))
		require.NoError(t, err)
		m, err := New(Config{Pool: pool, Index: idx})
		require.NoError(t, err)
		s := &stack{m: m, pool: pool, idx: idx}
		_, err = m.Admit(1, &Request{Prompt: prompt(10, 18)}) // 4 full blocks and a partial one
		require.NoError(t, err)
		_, err = m.Admit(2, &Request{Prompt: prompt(900, 3)})
		require.NoError(t, err)
		before := pool.Available()
		require.Equal(t, 6, before)

		st := s.state(t)
		_, err = m.Preempt(PreemptRequest{Need: 6, Mode: Swap, Protect: []SeqID{2}}, nil)
		var oob *blocks.OutOfBlocksError
		require.ErrorAs(t, err, &oob)
		require.Equal(t, 5, oob.Available, "seq 1 frees 5 in all")
		require.Equal(t, st, s.state(t))

		out, err := m.Preempt(PreemptRequest{Need: 5, Mode: Swap, Protect: []SeqID{2}}, nil)
		require.NoError(t, err, "Need counts what the demotions free")
		require.Len(t, out, 1)
		require.Equal(t, 1, out[0].Freed, "the partial block")
		require.Equal(t, 4, out[0].Awaiting, "the 4 demoted blocks")
		require.Equal(t, before+1, pool.Available())
		plans := m.TakePlans(nil)
		require.Len(t, plans, 1)
		if stream {
			require.Equal(t, before+5, pool.Available(), "stream-ordered: available once handed out")
		} else {
			require.Equal(t, before+1, pool.Available(), "available only once confirmed")
		}
		require.NoError(t, m.CheckInvariants())
		_, err = m.CompleteTransfer(plans[0].ID, true)
		require.NoError(t, err)
		require.Equal(t, before+5, pool.Available())
		require.Equal(t, 4, m.Stats().HostInUse)
		res, err := m.Resume(1)
		require.NoError(t, err)
		require.Equal(t, 16, res.LoadTokens)
		s.done(t)
	}
}

// A victim whose load is in flight: the load holds its loading blocks, so Preempt counts
// them neither in Freed nor in Awaiting (nor against Need); they return when the load
// completes.
func TestRecomputeVictimLoadingAwaits(t *testing.T) {
	s := newTieredStack(t, 8, 4, 8, 0)
	req := &Request{Prompt: prompt(10, 17)} // 4 full blocks and a token
	_, err := s.m.Admit(1, req)
	require.NoError(t, err)
	_, err = s.m.PreemptSeq(1, Swap)
	require.NoError(t, err)
	s.completeAll(t, true)
	require.NoError(t, s.m.Abort(1))
	res, err := s.m.Admit(2, req)
	require.NoError(t, err)
	require.Equal(t, 16, res.LoadTokens)
	before := s.pool.Available()
	p, err := s.m.PreemptSeq(2, Recompute)
	require.NoError(t, err)
	require.Equal(t, 1, p.Freed, "the computed last block")
	require.Zero(t, p.Awaiting, "the 4 loading blocks are the load's")
	require.Equal(t, before+1, s.pool.Available())
	s.completeAll(t, true)
	require.Equal(t, before+5, s.pool.Available(), "the load's completion returned them")
	s.done(t)
}
