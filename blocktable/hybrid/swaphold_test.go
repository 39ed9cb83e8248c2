package hybrid_test

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A swap holds the victim's 8 cached blocks (4 per group) in tier 1: a tier of 8 takes
// it, one of 7 refuses it with a TierFullError and nothing changes; Preempt refuses the
// same way, preempting nobody.
func TestHybridSwapHoldRoom(t *testing.T) {
	for _, tc := range []struct {
		capacity int
		ok       bool
	}{{8, true}, {7, false}} {
		m := tiered(t, prefix.TierSpec{Capacity: tc.capacity, Write: prefix.WriteBack}, 0)
		p1 := seqTokens(17, 0)
		_, err := m.Admit(1, &hybrid.Request{Prompt: p1, MaxTokens: 20})
		require.NoError(t, err)
		before := m.Stats()
		v, err := m.PreemptSeq(1, blocktable.Swap)
		if tc.ok {
			require.NoError(t, err)
			require.Equal(t, 2, v.Freed, "the partial blocks")
			require.Equal(t, 8, v.Awaiting, "the cached blocks, once copied")
			require.NoError(t, m.CheckInvariants())
			continue
		}
		var full *prefix.TierFullError
		require.True(t, errors.As(err, &full), "%v", err)
		require.Equal(t, prefix.TierFullError{Requested: 8, Available: 7}, *full)
		require.Equal(t, before, m.Stats())
		require.False(t, m.Swapped(1))
		require.Empty(t, m.TakePlans(nil), "no copy prepared")
		_, err = m.Preempt(blocktable.PreemptRequest{Need: 1, Mode: blocktable.Swap}, nil)
		require.ErrorIs(t, err, prefix.ErrTierFull)
		require.Equal(t, before, m.Stats())
		require.NoError(t, m.Append(1, []int32{5}), "still running")
		require.NoError(t, m.CheckInvariants())
	}
}

// A swapped sequence's copies survive host pressure that evicts a finished sequence's:
// with write-through, a second prompt's 8 copies would take tier 1's 8 slots; held, they
// find no room, and Resume loads the swapped prefix.
func TestHybridSwapHoldSurvivesPressure(t *testing.T) {
	for _, swap := range []bool{true, false} {
		m := tiered(t, prefix.TierSpec{Capacity: 8, Write: prefix.WriteThrough}, 0)
		p1, p2 := seqTokens(17, 0), seqTokens(17, 1000)
		_, err := m.Admit(1, &hybrid.Request{Prompt: p1, MaxTokens: 20})
		require.NoError(t, err)
		completeAll(t, m, true)
		require.Equal(t, 8, m.TierStats(1).Resident)
		if swap {
			v, err := m.PreemptSeq(1, blocktable.Swap)
			require.NoError(t, err)
			require.Equal(t, 10, v.Freed, "copied already: every block is free at once")
			require.Zero(t, v.Awaiting)
		} else {
			require.NoError(t, m.Finish(1))
		}
		_, err = m.Admit(2, &hybrid.Request{Prompt: p2, MaxTokens: 20})
		require.NoError(t, err)
		completeAll(t, m, true)
		require.NoError(t, m.Finish(2))
		require.NoError(t, m.CheckInvariants())
		hit, load, err := m.MatchTiers(&hybrid.Request{Prompt: p1})
		require.NoError(t, err)
		if !swap {
			require.Equal(t, uint64(8), m.TierStats(1).Evicted, "the second prompt's copies took every slot")
			require.Zero(t, hit+load)
			continue
		}
		require.Zero(t, m.TierStats(1).Evicted, "held: nothing evicted")
		require.Equal(t, 16, hit+load)
		r, err := m.Resume(1)
		require.NoError(t, err)
		require.Equal(t, 16, r.Hit+r.LoadTokens)
		require.Len(t, completeAll(t, m, true), min(1, r.LoadTokens))
		require.NoError(t, m.Finish(1))
		require.NoError(t, m.CheckInvariants())
	}
}

// ResetPrefixCache drops held copies too; Resume then computes the prefix, and Finish of a
// swapped sequence releases its hold.
func TestHybridSwapHoldReset(t *testing.T) {
	m := tiered(t, prefix.TierSpec{Capacity: 8, Write: prefix.WriteThrough}, 0)
	for id := range blocktable.SeqID(2) {
		_, err := m.Admit(id, &hybrid.Request{Prompt: seqTokens(9, int32(100*id)), MaxTokens: 12})
		require.NoError(t, err)
	}
	completeAll(t, m, true)
	for id := range blocktable.SeqID(2) {
		_, err := m.PreemptSeq(id, blocktable.Swap)
		require.NoError(t, err)
	}
	require.NoError(t, m.ResetPrefixCache())
	require.Zero(t, m.TierStats(1).Resident)
	require.NoError(t, m.CheckInvariants())
	r, err := m.Resume(0)
	require.NoError(t, err)
	require.Zero(t, r.Hit+r.LoadTokens)
	require.NoError(t, m.Finish(1))
	require.False(t, m.Swapped(1))
	require.NoError(t, m.Finish(0))
	require.NoError(t, m.CheckInvariants())
}

// Preempt in Swap mode counts Freed + Awaiting against Need: two victims of 6 blocks
// each (2 cached per group, 1 partial per group) free their partial blocks at once and
// their cached ones once copied.
func TestHybridSwapPreemptAwaiting(t *testing.T) {
	m := tiered(t, prefix.TierSpec{Capacity: 32, Write: prefix.WriteBack}, 0)
	for id := range blocktable.SeqID(2) {
		_, err := m.Admit(id, &hybrid.Request{Prompt: seqTokens(9, int32(100*id)), MaxTokens: 12})
		require.NoError(t, err)
	}
	require.Zero(t, m.Stats().Free)
	v, err := m.Preempt(blocktable.PreemptRequest{Need: 8, Mode: blocktable.Swap}, nil)
	require.NoError(t, err)
	require.Len(t, v, 2)
	for _, p := range v {
		require.Equal(t, [2]int{2, 4}, [2]int{p.Freed, p.Awaiting}, "seq %d", p.Seq)
	}
	require.Equal(t, 4, m.Stats().Free)
	completeAll(t, m, true)
	require.Equal(t, 12, m.Stats().Free)
	require.NoError(t, m.CheckInvariants())
}
