package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A Swap refused while tier 1's slots take copies in flight says how many
// (TierFullError.InFlight, as prefix's Hold does), so that a caller can tell a refusal
// worth retrying once the copies are confirmed from a tier full of held copies. A
// write-through host of 2 slots receives the copies of seq 1's two full blocks; seq 2's
// two find no room, and its Swap is refused with InFlight 2, by Preempt and PreemptSeq
// alike, changing nothing. Once the copies land (evictable then) the retry succeeds.
// Swapped out, seq 2's blocks are held: a Swap of seq 3 is refused with InFlight 0 and
// nothing to wait for.
func TestSwapRefusedCountsInFlight(t *testing.T) {
	pool := newPool(t, 13)
	clock := &evict.Counter{}
	idx, err := prefix.New(pool, 4, prefix.WithClock(clock), prefix.WithTiers(prefix.TierConfig{
		Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 2, Write: prefix.WriteThrough}}, BlockBytes: 1,
	}))
	require.NoError(t, err)
	m, err := New(Config{Pool: pool, Index: idx, BlockSize: 4, Clock: clock})
	require.NoError(t, err)
	s := &stack{m: m, pool: pool, idx: idx}
	_, err = m.Admit(1, &Request{Prompt: prompt(10, 9)}) // 2 full blocks and a token: their copies take both slots
	require.NoError(t, err)
	_, err = m.Admit(2, &Request{Prompt: prompt(500, 9)})
	require.NoError(t, err)
	require.Equal(t, 2, idx.InFlightSlots(1))
	before := s.state(t)

	_, err = m.PreemptSeq(2, Swap)
	requireTierFull(t, err, 2, 2, 0)
	requireInFlight(t, err, 2)
	require.Equal(t, before, s.state(t))
	_, err = m.Preempt(PreemptRequest{Need: 3, Mode: Swap, Protect: []SeqID{1}}, nil)
	requireTierFull(t, err, 2, 2, 0)
	requireInFlight(t, err, 2)
	require.Equal(t, before, s.state(t))

	s.completeAll(t, true)
	require.Zero(t, idx.InFlightSlots(1), "every copy landed")
	_, err = m.PreemptSeq(2, Swap)
	require.NoError(t, err, "the landed copies are evictable")
	s.completeAll(t, true)

	_, err = m.Admit(3, &Request{Prompt: prompt(900, 5)})
	require.NoError(t, err)
	_, err = m.PreemptSeq(3, Swap)
	requireTierFull(t, err, 3, 1, 0)
	requireInFlight(t, err, 0)
	s.done(t)
}

func requireInFlight(t *testing.T, err error, n int) {
	t.Helper()
	var tf *prefix.TierFullError
	require.ErrorAs(t, err, &tf)
	require.Equal(t, n, tf.InFlight)
}
