package hybrid_test

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// tiered is full attention and a 4-token window over 12 usable blocks, with a host tier.
func tiered(t *testing.T, spec prefix.TierSpec, freeTarget int) *hybrid.Manager {
	t.Helper()
	spec.Medium = prefix.MediumCPU
	m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
		hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 4},
	}, NumBlocks: 13, Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{spec}, BlockBytes: 64, FreeTarget: freeTarget}})
	require.NoError(t, err)
	return m
}

// completeAll takes every plan and completes it with ok, returning the loads' outcomes.
func completeAll(t *testing.T, m *hybrid.Manager, ok bool) []hybrid.LoadDone {
	t.Helper()
	var out []hybrid.LoadDone
	seen := map[prefix.TransferID]bool{}
	for _, p := range m.TakePlans(nil) {
		if seen[p.ID] {
			continue
		}
		seen[p.ID] = true
		d, err := m.CompleteTransfer(p.ID, ok || p.Kind == prefix.Store)
		require.NoError(t, err)
		if d.Loaded {
			out = append(out, d)
		}
		require.NoError(t, m.CheckInvariants())
	}
	return out
}

// A prefix written through to the host and evicted from the device is found there again:
// full attention loads every block, the window only the block inside it; a failed load
// evicts the keys and the sequence computes the span.
func TestHybridTierLoad(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ok      bool
		compute int
	}{{"ok", true, 0}, {"failed", false, 16}} {
		t.Run(tc.name, func(t *testing.T) {
			m := tiered(t, prefix.TierSpec{Capacity: 32, Write: prefix.WriteThrough}, 0)
			p1 := seqTokens(17, 0)
			_, err := m.Admit(1, &hybrid.Request{Prompt: p1, MaxTokens: 20})
			require.NoError(t, err)
			require.Empty(t, completeAll(t, m, true))
			require.Equal(t, 8, m.TierStats(1).Resident, "4 full blocks of each group")
			require.NoError(t, m.Finish(1))
			_, err = m.Admit(2, &hybrid.Request{Prompt: seqTokens(24, 1000), MaxTokens: 24}) // evicts all of 1's
			require.NoError(t, err)
			completeAll(t, m, true)
			require.NoError(t, m.Finish(2))
			require.Zero(t, m.Match(p1), "nothing of 1 on the device")

			r, err := m.AdmitTiered(3, &hybrid.Request{Prompt: p1, MaxTokens: 20})
			require.NoError(t, err)
			require.Equal(t, 0, r.Hit)
			require.Equal(t, 16, r.LoadTokens)
			require.Equal(t, 5, r.Tiers.Lower, "4 full-attention blocks and the window's last")
			require.Equal(t, 5, r.Tiers.Blocks[1])
			id, err := m.Loading(3)
			require.NoError(t, err)
			require.Equal(t, r.Load, id)
			require.Zero(t, m.Match(p1), "loading blocks are not cached yet")
			done := completeAll(t, m, tc.ok)
			require.Len(t, done, 1)
			require.Equal(t, blocktable.SeqID(3), done[0].Seq)
			require.Equal(t, tc.compute, done[0].ComputeTokens)
			require.Equal(t, 16, m.Match(p1), "cached once the load completed (or computed)")
			if !tc.ok {
				require.Equal(t, uint64(5), m.TierStats(1).LoadFailed)
				require.Equal(t, uint64(16), m.TierCounts().LoadFailedTokens)
			} else {
				require.Equal(t, uint64(16), m.TierCounts().LoadedTokens)
			}
			require.NoError(t, m.Finish(3))
			completeAll(t, m, true)
			require.Equal(t, 12, m.Stats().Free, "nothing leaked")
			require.NoError(t, m.CheckInvariants())
		})
	}
}

// Swap preemption demotes the victim's blocks into the host; Resume loads them back.
func TestHybridTierSwap(t *testing.T) {
	m := tiered(t, prefix.TierSpec{Capacity: 32, Write: prefix.WriteBack}, 0)
	p1 := seqTokens(17, 0)
	_, err := m.Admit(1, &hybrid.Request{Prompt: p1, MaxTokens: 20})
	require.NoError(t, err)
	v, err := m.PreemptSeq(1, blocktable.Swap)
	require.NoError(t, err)
	require.Equal(t, 2, v.Freed, "the partial blocks; the 8 cached ones wait for their copies")
	require.True(t, m.Swapped(1))
	_, err = m.Admit(1, &hybrid.Request{Prompt: p1, MaxTokens: 20})
	require.ErrorIs(t, err, blocktable.ErrDuplicateSeq)
	completeAll(t, m, true)
	require.Equal(t, 12, m.Stats().Free)
	require.Zero(t, m.Match(p1), "demoted: off the device")
	r, err := m.Resume(1)
	require.NoError(t, err)
	require.Equal(t, 16, r.LoadTokens)
	require.False(t, m.Swapped(1))
	require.Len(t, completeAll(t, m, true), 1)
	require.NoError(t, m.Finish(1))
	require.Equal(t, hybrid.TierCounts{LoadedTokens: 0, SwapOuts: 1, SwapIns: 1}, m.TierCounts(), "a resumed load is not counted as a hit")
	require.Equal(t, 12, m.Stats().Free)
}

// Write-back ahead of need: below the free-block watermark, the free queue's next
// victims are copied down and leave the device once copied, so no allocation waits.
func TestHybridTierDemoteAhead(t *testing.T) {
	m := tiered(t, prefix.TierSpec{Capacity: 32, Write: prefix.WriteBack}, 12)
	p1 := seqTokens(17, 0)
	_, err := m.Admit(1, &hybrid.Request{Prompt: p1, MaxTokens: 20})
	require.NoError(t, err)
	require.NoError(t, m.Finish(1))
	plans := m.TakePlans(nil)
	require.Len(t, plans, 1)
	require.Equal(t, 8, plans[0].Blocks)
	require.Equal(t, int64(8*64), plans[0].Bytes)
	require.Equal(t, 8, m.TierStats(prefix.Device).Pending)
	require.Equal(t, 4, m.Stats().Free, "blocks in flight are unavailable")
	require.NoError(t, m.CheckInvariants())
	_, err = m.CompleteTransfer(plans[0].ID, true)
	require.NoError(t, err)
	require.Equal(t, 12, m.Stats().Free)
	require.Zero(t, m.Match(p1))
	require.Equal(t, 8, m.TierStats(1).Resident)
	require.NoError(t, m.CheckInvariants())
}

// The tiered cycle (an admission that loads, the plans, their completion, a decode step,
// the finish, write-through stores) allocates nothing in steady state.
func TestHybridTierCycleAllocatesNothing(t *testing.T) {
	if invariant.Enabled {
		t.Skip("the invariant checks (kvinvariants, -race) allocate")
	}
	for _, tc := range []struct {
		name       string
		spec       prefix.TierSpec
		freeTarget int
	}{
		{"write-through", prefix.TierSpec{Capacity: 64, Write: prefix.WriteThrough}, 0},
		{"write-back ahead of need", prefix.TierSpec{Capacity: 64, Write: prefix.WriteBack}, 12},
		{"after two hits", prefix.TierSpec{Capacity: 64, Write: prefix.WriteAfterHits, Hits: 2}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) { tierCycleAllocs(t, tc.spec, tc.freeTarget) })
	}
}

func tierCycleAllocs(t *testing.T, spec prefix.TierSpec, freeTarget int) {
	m := tiered(t, spec, freeTarget)
	p1, p2 := seqTokens(17, 0), seqTokens(24, 1000)
	plans := make([]prefix.Plan, 0, 16)
	loads := 0
	serve := func() {
		plans = m.TakePlans(plans[:0])
		for j, pl := range plans {
			if j > 0 && plans[j-1].ID == pl.ID {
				continue
			}
			if _, err := m.CompleteTransfer(pl.ID, true); err != nil {
				panic(err)
			}
		}
	}
	cycle := func() {
		for i, p := range [][]int32{p1, p2} {
			id := blocktable.SeqID(i)
			r, err := m.AdmitTiered(id, &hybrid.Request{Prompt: p, MaxTokens: len(p) + 4})
			if err != nil {
				panic(err)
			}
			if r.LoadTokens > 0 {
				loads++
			}
			serve()
			if err := m.Append(id, []int32{7}); err != nil {
				panic(err)
			}
			if err := m.Finish(id); err != nil {
				panic(err)
			}
			serve() // a step boundary: write-back demotes the free queue's next victims
		}
	}
	for range 3 {
		cycle()
	}
	loads = 0
	require.Zero(t, testing.AllocsPerRun(50, cycle))
	if spec.Write != prefix.WriteAfterHits { // never hit on the device, never stored
		require.Equal(t, 2*51, loads, "every admission loads")
	}
	require.NoError(t, m.CheckInvariants())
}

// EvictBlocks may drop a block a store is still copying: the copy completes into its
// slot, and the block goes back to the free queue uncached.
func TestHybridTierEvictBlocksDuringStore(t *testing.T) {
	m := tiered(t, prefix.TierSpec{Capacity: 32, Write: prefix.WriteThrough}, 0)
	_, err := m.Admit(1, &hybrid.Request{Prompt: seqTokens(9, 0), MaxTokens: 12})
	require.NoError(t, err)
	tb, err := m.Table(1, 0)
	require.NoError(t, err)
	m.EvictBlocks(tb[:1])
	require.NoError(t, m.CheckInvariants())
	require.NoError(t, m.Finish(1))
	completeAll(t, m, true)
	require.Equal(t, 12, m.Stats().Free)
	require.Equal(t, 4, m.TierStats(1).Resident)
}

// Preempt in Swap mode picks victims as in recompute mode and swaps them into the tiers;
// without tiers it is refused with ErrNoHostPool.
func TestHybridTierPreemptSwap(t *testing.T) {
	m := tiered(t, prefix.TierSpec{Capacity: 32, Write: prefix.WriteBack}, 0)
	for id := range blocktable.SeqID(2) {
		_, err := m.Admit(id, &hybrid.Request{Prompt: seqTokens(9, int32(100*id)), MaxTokens: 12})
		require.NoError(t, err)
	}
	v, err := m.Preempt(blocktable.PreemptRequest{Need: 1, Mode: blocktable.Swap}, nil)
	require.NoError(t, err)
	require.Len(t, v, 1)
	require.Equal(t, blocktable.Swap, v[0].Mode)
	require.Equal(t, blocktable.SeqID(1), v[0].Seq, "newest first")
	require.True(t, m.Swapped(1))
	completeAll(t, m, true)
	_, err = m.Resume(1)
	require.NoError(t, err)
	completeAll(t, m, true)
	require.NoError(t, m.Finish(0))
	require.NoError(t, m.Finish(1))
	require.Equal(t, 12, m.Stats().Free)

	plain := twoGroups(t, 16)
	_, err = plain.Admit(1, &hybrid.Request{Prompt: seqTokens(9, 0), MaxTokens: 12})
	require.NoError(t, err)
	_, err = plain.Preempt(blocktable.PreemptRequest{Need: 1, Mode: blocktable.Swap}, nil)
	require.ErrorIs(t, err, blocktable.ErrNoHostPool)
	_, err = m.Resume(7)
	require.ErrorIs(t, err, blocktable.ErrUnknownSeq, "never admitted: unknown, as blocktable.Manager says")
}

// A Mamba group in align mode takes its state from a lower tier, as vLLM's offloading
// connector does (it took none, though its blocks were copied and held): a prefix
// written through to the host and evicted from the device loads full attention's four
// blocks and the state at the hit into a block of its own, the entry before the running
// block, and is cached once the load completes.
func TestHybridTierLoadMambaAlign(t *testing.T) {
	m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
		hybrid.FullAttention{Block: 4}, hybrid.Mamba{Block: 4, Mode: hybrid.MambaAlign},
	}, NumBlocks: 13, Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 32, Write: prefix.WriteThrough}}, BlockBytes: 64}})
	require.NoError(t, err)
	p1 := seqTokens(17, 0)
	// A prefill in chunks that end on block boundaries (AlignedChunk), so that the
	// state at 16 tokens is cached.
	_, err = m.Admit(1, &hybrid.Request{Prompt: p1, MaxTokens: 20, Prefill: 16})
	require.NoError(t, err)
	require.NoError(t, m.Extend(1, 1))
	completeAll(t, m, true)
	require.NoError(t, m.Finish(1))
	_, err = m.Admit(2, &hybrid.Request{Prompt: seqTokens(36, 1000), MaxTokens: 36}) // evicts all of 1's
	require.NoError(t, err)
	completeAll(t, m, true)
	require.NoError(t, m.Finish(2))
	require.Zero(t, m.Match(p1), "nothing of 1 on the device")

	var c hybrid.AdmitCost
	require.NoError(t, m.AdmitCost(&hybrid.Request{Prompt: p1, MaxTokens: 20}, &c))
	require.Equal(t, []int{5, 2}, c.Groups, "full attention's five blocks; the state's block and the running one")
	h, l, err := m.MatchTiers(&hybrid.Request{Prompt: p1})
	require.NoError(t, err)
	require.Equal(t, [2]int{0, 16}, [2]int{h, l})
	free := m.Stats().Free
	r, err := m.AdmitTiered(3, &hybrid.Request{Prompt: p1, MaxTokens: 20})
	require.NoError(t, err)
	require.Equal(t, free-c.Need, m.Stats().Free, "AdmitCost's count is Admit's")
	require.Equal(t, 16, r.LoadTokens)
	require.Equal(t, 5, r.Tiers.Lower, "4 full-attention blocks and the state at the hit")
	tb, err := m.Table(3, 1)
	require.NoError(t, err)
	require.Len(t, tb, 5)
	require.Equal(t, []blocks.ID{0, 0, 0}, tb[:3], "null up to the state")
	require.NotZero(t, tb[3], "the state's block, loaded")
	require.NotZero(t, tb[4], "the running block")
	done := completeAll(t, m, true)
	require.Len(t, done, 1)
	require.Equal(t, 16, m.Match(p1), "cached once the load completed")
	require.NoError(t, m.Append(3, []int32{7}))
	require.NoError(t, m.Finish(3))
	completeAll(t, m, true)
	require.Equal(t, 12, m.Stats().Free, "nothing leaked")
	require.NoError(t, m.CheckInvariants())
}

// EvictBlocks drops device blocks only, as vLLM's evict_blocks drops them from the GPU
// block pool alone: the host's copies of the dropped prefix stay, and the next admission
// loads them.
func TestHybridEvictBlocksKeepsLowerTiers(t *testing.T) {
	m := tiered(t, prefix.TierSpec{Capacity: 32, Write: prefix.WriteThrough}, 0)
	p1 := seqTokens(17, 0)
	_, err := m.Admit(1, &hybrid.Request{Prompt: p1, MaxTokens: 20})
	require.NoError(t, err)
	completeAll(t, m, true)
	var ids []blocks.ID
	for g := range 2 {
		tb, err := m.Table(1, g)
		require.NoError(t, err)
		ids = append(ids, tb...)
	}
	require.NoError(t, m.Finish(1))
	resident := m.TierStats(1).Resident
	require.Equal(t, 8, resident)
	m.EvictBlocks(ids)
	require.Equal(t, uint64(8), m.Stats().Dropped)
	require.Zero(t, m.Match(p1), "off the device")
	require.Equal(t, resident, m.TierStats(1).Resident, "the host keeps its copies")
	h, l, err := m.MatchTiers(&hybrid.Request{Prompt: p1})
	require.NoError(t, err)
	require.Equal(t, [2]int{0, 16}, [2]int{h, l})
	r, err := m.AdmitTiered(2, &hybrid.Request{Prompt: p1, MaxTokens: 20})
	require.NoError(t, err)
	require.Equal(t, 16, r.LoadTokens)
	require.Len(t, completeAll(t, m, true), 1)
	require.Equal(t, 16, m.Match(p1))
	require.NoError(t, m.Finish(2))
	require.NoError(t, m.CheckInvariants())
}

// Under TierConfig.StreamOrdered a store's device blocks come back when TakePlans hands
// its plan out, as blocktable.Manager's do (they came back only at completion): a swap's
// demoted blocks are free once the plans are taken, still cached at the free queue's
// front until an allocation takes them or the copies are confirmed, not lost (their
// copies are in flight), and completing the copies evicts them.
func TestHybridTierStreamOrdered(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
			hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 4},
		}, NumBlocks: 13, Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 32, Write: prefix.WriteBack}},
			BlockBytes: 64, StreamOrdered: streamed}})
		require.NoError(t, err)
		p1 := seqTokens(17, 0)
		_, err = m.Admit(1, &hybrid.Request{Prompt: p1, MaxTokens: 20})
		require.NoError(t, err)
		v, err := m.PreemptSeq(1, blocktable.Swap)
		require.NoError(t, err)
		require.Equal(t, 2, v.Freed)
		require.Equal(t, 8, v.Awaiting, "the cached blocks wait for their copies")
		require.Equal(t, 4, m.Stats().Free)
		plans := m.TakePlans(nil)
		require.NotEmpty(t, plans)
		if streamed {
			require.Equal(t, 12, m.Stats().Free, "handed out: the demoted blocks are free")
			require.Equal(t, 16, m.Match(p1), "and still cached until an allocation takes them")
			require.Zero(t, m.TierStats(prefix.Device).Lost, "their copies are in flight")
		} else {
			require.Equal(t, 4, m.Stats().Free, "free once the copies are confirmed")
		}
		require.NoError(t, m.CheckInvariants())
		for _, p := range plans {
			_, err := m.CompleteTransfer(p.ID, true)
			require.NoError(t, err)
		}
		require.Equal(t, 12, m.Stats().Free)
		require.Zero(t, m.Match(p1), "confirmed: off the device")
		require.Zero(t, m.TierStats(prefix.Device).Lost)
		require.NoError(t, m.CheckInvariants())
		r, err := m.Resume(1)
		require.NoError(t, err)
		require.Equal(t, 16, r.LoadTokens, "the host holds what the swap demoted")
		require.Len(t, completeAll(t, m, true), 1)
		require.NoError(t, m.Finish(1))
		completeAll(t, m, true)
		require.Equal(t, 12, m.Stats().Free, "nothing leaked")
		require.NoError(t, m.CheckInvariants())
	}
}

// A stream-ordered demotion whose copy fails keeps its blocks cached, as one without
// StreamOrdered does: handed out, they wait at the free queue's front, still cached; the
// failure moves them to its tail, released now, so that the next allocation takes other
// blocks. Before, TakePlans evicted them and the failure lost them, uncounted. If an
// allocation took them first, the device's Lost counts them at the failure.
func TestHybridStreamOrderedFailedDemotionStaysCached(t *testing.T) {
	for _, c := range []struct {
		name       string
		evictFirst bool
		hit        int // p1's device hit after the failure and one more admission
		lost       uint64
	}{
		{"copies failed", false, 16, 0},
		{"copies failed after an allocation took the blocks", true, 0, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
				hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 4},
			}, NumBlocks: 13, Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 32, Write: prefix.WriteBack}},
				BlockBytes: 64, StreamOrdered: true}})
			require.NoError(t, err)
			p1 := seqTokens(17, 0)
			_, err = m.Admit(1, &hybrid.Request{Prompt: p1, MaxTokens: 20})
			require.NoError(t, err)
			_, err = m.PreemptSeq(1, blocktable.Swap)
			require.NoError(t, err)
			plans := m.TakePlans(nil)
			require.NotEmpty(t, plans)
			require.Equal(t, 16, m.Match(p1))
			if c.evictFirst {
				_, err = m.Admit(2, &hybrid.Request{Prompt: seqTokens(17, 100), MaxTokens: 20})
				require.NoError(t, err)
				require.Zero(t, m.Match(p1))
				require.NoError(t, m.Finish(2))
			}
			for _, p := range plans {
				_, err := m.CompleteTransfer(p.ID, false)
				require.NoError(t, err)
			}
			require.Equal(t, c.lost, m.TierStats(prefix.Device).Lost)
			require.NoError(t, m.CheckInvariants())
			// Two blocks, the queue's front: other blocks than the failed copies' (at the tail).
			_, err = m.Admit(3, &hybrid.Request{Prompt: seqTokens(3, 500), MaxTokens: 4})
			require.NoError(t, err)
			require.Equal(t, c.hit, m.Match(p1))
			require.NoError(t, m.CheckInvariants())
		})
	}
}
