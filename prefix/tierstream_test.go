package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// Under StreamOrdered a demoted block is reusable as soon as TakePlans hands its plan out
// (it stays cached, an eviction candidate, until an allocation takes it or its copy is
// confirmed); without it, only once the copy is confirmed. The copy lands the same way in
// both.
func TestStreamOrderedReleasesDemotionsAtTake(t *testing.T) {
	for _, stream := range []bool{false, true} {
		pool, x := newTestIndex(t, 9, WithTiers(TierConfig{
			Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 8}}, BlockBytes: 1, FreeTarget: 8, StreamOrdered: stream,
		}))
		p := Prompt{Tokens: toks(100, 13)} // 3 full blocks and a partial one
		admit(t, x, pool, p).finish(t, x)
		require.Equal(t, 5, pool.NumFree(), "3 cached blocks")
		plans := x.TakePlans(nil)
		require.Len(t, plans, 1)
		require.Equal(t, 3, plans[0].Blocks)
		require.NoError(t, x.CheckInvariants())
		if stream {
			require.Equal(t, 8, pool.Available(), "stream-ordered: reusable once handed out")
			require.Equal(t, 3, x.Reclaimable(), "still cached, evictable")
			require.Equal(t, 3, x.TierStatsOf(Device).Pending, "still being demoted")
			require.Zero(t, x.TierStatsOf(Device).Lost)
		} else {
			require.Equal(t, 5, pool.NumFree(), "unavailable until confirmed")
			require.Equal(t, 0, x.Reclaimable())
		}
		require.Zero(t, x.PeekLower(&p, Cursor{}, LeaveOne, 0).Lower, "not in the host until confirmed")
		completeAll(t, x, plans, true)
		require.Equal(t, 8, pool.NumFree())
		require.Equal(t, 3, x.PeekLower(&p, Cursor{}, LeaveOne, 0).Lower)
		require.Equal(t, 3, x.TierStatsOf(1).Resident)
		require.Zero(t, x.TierStatsOf(Device).Lost)
	}
}

// A stream-ordered demotion whose copy fails leaves its blocks cached on the device, as
// one without StreamOrdered does (TestFailedDemotionRanksAsReleasedNow): ranked as
// released now, so that the next eviction takes an older block. Before, TakePlans had
// evicted them, and the failure lost them with no copy anywhere, uncounted. If an
// allocation took them before the copy failed, they are lost, and the device's Lost
// says so at the failure. A confirmed copy evicts them.
func TestStreamOrderedFailedDemotionStaysCached(t *testing.T) {
	for _, c := range []struct {
		name         string
		evictFirst   bool // an eviction takes the demoted blocks before the copy completes
		ok           bool
		paCached     int // pa's blocks on the device at the end
		pbCached     int
		host         int
		evicted      uint64 // device blocks evicted once the copy completed
		lost         uint64 // and lost
		availableEnd int
	}{
		{"copy failed", false, false, 2, 0, 0, 0, 0, 8},
		{"copy failed after an eviction took them", true, false, 0, 0, 0, 2, 2, 8},
		{"copy confirmed", false, true, 0, 0, 2, 2, 0, 8},
		{"copy confirmed after an eviction took them", true, true, 0, 0, 2, 2, 0, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool, x := newTestIndex(t, 9, WithTiers(TierConfig{
				Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 8}}, BlockBytes: 1, FreeTarget: 6, StreamOrdered: true,
			}))
			pa, pb := Prompt{Tokens: toks(7, 9)}, Prompt{Tokens: toks(70, 9)}
			admit(t, x, pool, pa).finish(t, x)
			admit(t, x, pool, pb).finish(t, x)
			plans := x.TakePlans(nil)
			require.Len(t, plans, 1)
			require.Equal(t, 2, plans[0].Blocks, "pa's two blocks, the oldest, are demoted")
			require.Equal(t, 4, x.Stats().Cached, "handed out, still cached")
			require.Equal(t, 2, x.TierStatsOf(Device).Pending)
			require.NoError(t, x.CheckInvariants())
			if c.evictFirst {
				require.Equal(t, 2, x.Evict(2))
				ids, _ := x.Peek(nil, &pa, LeaveOne)
				require.Empty(t, ids, "the demoted blocks are the next victims")
				require.Zero(t, x.TierStatsOf(Device).Lost, "their copy is in flight")
			}
			completeAll(t, x, plans, c.ok)
			st := x.TierStatsOf(Device)
			require.Zero(t, st.Pending, "no longer being demoted")
			require.Equal(t, c.evicted, st.Evicted)
			require.Equal(t, c.lost, st.Lost)
			require.Equal(t, 2, x.Evict(2), "the next eviction")
			ids, _ := x.Peek(nil, &pa, LeaveOne)
			require.Len(t, ids, c.paCached)
			ids, _ = x.Peek(nil, &pb, LeaveOne)
			require.Len(t, ids, c.pbCached, "pb's were the older once pa's copy failed")
			require.Equal(t, c.host, x.TierStatsOf(1).Resident)
			require.Equal(t, uint64(2-c.host), x.TierStatsOf(1).StoreFailed)
			require.Zero(t, x.TierStatsOf(1).Pending)
			require.Equal(t, c.availableEnd, pool.Available())
			require.NoError(t, x.CheckInvariants())
		})
	}
}

// FreeTarget above the pool's capacity is refused: TakePlans would demote every cached
// block and never reach it.
func TestFreeTargetAbovePoolRefused(t *testing.T) {
	for _, c := range []struct {
		target int
		ok     bool
	}{{8, true}, {9, false}, {1 << 30, false}} {
		pool, err := blocks.New(9, blocks.WithNullBlock())
		require.NoError(t, err)
		_, err = New(pool, testBS, WithTiers(TierConfig{
			Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 8}}, BlockBytes: 1, FreeTarget: c.target,
		}))
		if c.ok {
			require.NoError(t, err)
			continue
		}
		var se *SizeError
		require.ErrorAs(t, err, &se, "target %d", c.target)
		require.Equal(t, SizeError{What: "free target", N: int64(c.target), Max: 8}, *se)
		require.ErrorIs(t, err, ErrInvalidArgument)
	}
}

// A load whose blocks come from the host and from the disk names both in Sources.
func TestLoadFromTwoTiersNamesBoth(t *testing.T) {
	pool, x := tierIndex(t, 9, WriteBack, 8, nil)
	p := Prompt{Tokens: toks(7, 9)}
	admit(t, x, pool, p).finish(t, x)
	completeAll(t, x, x.TakePlans(nil), true)
	completeAll(t, x, x.TakePlans(nil), true) // host to disk, write-through
	// A failed load of the first block evicts its host key: it is left on disk only.
	dst, err := pool.Allocate(nil, 1)
	require.NoError(t, err)
	id, err := x.PrepareLoad(&p, Cursor{}, LeaveOne, dst)
	require.NoError(t, err)
	_, err = x.CompleteTransfer(id, false)
	require.NoError(t, err)
	require.NoError(t, pool.Release(dst...))
	h := x.PeekLower(&p, Cursor{}, LeaveOne, 0)
	require.Equal(t, [MaxTiers]int{0, 1, 1, 0}, h.Blocks)

	dst, err = pool.Allocate(nil, 2)
	require.NoError(t, err)
	id, err = x.PrepareLoad(&p, Cursor{}, LeaveOne, dst)
	require.NoError(t, err)
	plans := x.TakePlans(nil)
	require.Len(t, plans, 2, "one plan per source tier")
	res, err := x.CompleteTransfer(id, true)
	require.NoError(t, err)
	require.Equal(t, [MaxTiers]int{0, 1, 1, 0}, res.Sources)
	require.Equal(t, Tier(1), res.From)
	require.Equal(t, 2, res.Blocks)
	require.NoError(t, pool.Release(dst...))
	require.NoError(t, x.CheckInvariants())
}

// Multimodal blocks are tiered: a prompt with an image, demoted to the host, is found there
// again with the same image, and not with another image behind the same placeholder tokens.
func TestMultimodalBlocksTiered(t *testing.T) {
	for _, form := range []MMKeyForm{MMKeyIdentifier, MMKeyIdentifierOffset} {
		pool, x := newTestIndex(t, 9, WithMMKeyForm(form), WithTiers(TierConfig{
			Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 8}}, BlockBytes: 1, FreeTarget: 8,
		}))
		tokens := cat(toks(1, 2), []int32{900, 900, 900, 900, 900, 900}, toks(5, 5)) // 3 blocks and a token
		img := func(h string) Prompt {
			return Prompt{Tokens: tokens, MM: []MMInput{{Hash: h, Offset: 2, Length: 6}}}
		}
		p := img("img-a")
		admit(t, x, pool, p).finish(t, x)
		completeAll(t, x, x.TakePlans(nil), true)
		require.Zero(t, x.Stats().Cached, "demoted, multimodal blocks included")
		require.Equal(t, 3, x.TierStatsOf(1).Resident)
		require.Equal(t, 3, x.PeekLower(&p, Cursor{}, LeaveOne, 0).Lower, "form %v", form)
		other := img("img-b")
		require.Zero(t, x.PeekLower(&other, Cursor{}, LeaveOne, 0).Lower, "another image behind the same tokens")
		text := Prompt{Tokens: tokens}
		require.Zero(t, x.PeekLower(&text, Cursor{}, LeaveOne, 0).Lower, "the same tokens without the image")

		dst, err := pool.Allocate(nil, 3)
		require.NoError(t, err)
		id, err := x.PrepareLoad(&p, Cursor{}, LeaveOne, dst)
		require.NoError(t, err)
		res, err := x.CompleteTransfer(id, true)
		require.NoError(t, err)
		require.Equal(t, 3, res.Blocks)
		cur := Cursor{}
		_, err = x.Commit(&cur, &p, dst)
		require.NoError(t, err)
		require.NoError(t, x.Release(dst))
		require.Equal(t, 3, x.Stats().Cached, "committed after the load: the entries link the device again")
		hits, _ := x.Peek(nil, &p, LeaveOne)
		require.Len(t, hits, 3)
		require.NoError(t, x.CheckInvariants())
	}
}
