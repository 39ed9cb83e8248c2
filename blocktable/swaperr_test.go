package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// newSwapStack is a Manager over a host tier of host blocks (write-back, no watermark)
// with preemption policy pol.
func newSwapStack(t *testing.T, usable, host int, pol evict.Preemption, stream bool) *stack {
	t.Helper()
	pool := newPool(t, usable+1)
	clock := &evict.Counter{}
	idx, err := prefix.New(pool, 4, prefix.WithClock(clock), prefix.WithTiers(prefix.TierConfig{
		Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: host}}, BlockBytes: 1, StreamOrdered: stream,
	}))
	require.NoError(t, err)
	m, err := New(Config{Pool: pool, Index: idx, BlockSize: 4, Clock: clock, Preemption: pol})
	require.NoError(t, err)
	return &stack{m: m, pool: pool, idx: idx}
}

// A Swap refused because tier 1 is full names the sequence it is about: the victim at
// which the victims' need passes the room (Preempt), or the one asked for (PreemptSeq),
// and errors.Is / errors.As still find prefix.ErrTierFull and its figures. Nothing
// changes. Seq 1 (one full block, the newest: fcfs's first victim) fits the host tier of
// 3 blocks; seq 2 (four) does not.
func TestSwapRefusedNamesTheSequence(t *testing.T) {
	pols := map[string]evict.Preemption{"fcfs": nil, "cost": evict.NewCostPreemption()}
	for name, pol := range pols {
		t.Run(name, func(t *testing.T) {
			s := newSwapStack(t, 12, 3, pol, false)
			_, err := s.m.Admit(2, &Request{Prompt: prompt(100, 17)}) // 4 full blocks and a token
			require.NoError(t, err)
			_, err = s.m.Admit(1, &Request{Prompt: prompt(10, 5)}) // 1 full block and a token
			require.NoError(t, err)
			before := s.state(t)

			// Both must go: seq 1's two blocks and seq 2's five. Seq 1 alone fits.
			_, err = s.m.Preempt(PreemptRequest{Need: 7, Mode: Swap}, nil)
			requireTierFull(t, err, 2, 5, 3)
			require.Equal(t, before, s.state(t))

			_, err = s.m.PreemptSeq(2, Swap)
			requireTierFull(t, err, 2, 4, 3)
			require.Equal(t, before, s.state(t))

			_, err = s.m.PreemptSeq(1, Swap)
			require.NoError(t, err, "seq 1 alone fits")
			s.done(t)
		})
	}
}

func requireTierFull(t *testing.T, err error, seq SeqID, need, room int) {
	t.Helper()
	require.ErrorIs(t, err, prefix.ErrTierFull)
	var se *SeqError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "swap out", se.Op)
	require.Equal(t, seq, se.Seq)
	var tf *prefix.TierFullError
	require.ErrorAs(t, err, &tf)
	require.Equal(t, need, tf.Requested)
	require.Equal(t, room, tf.Available)
	require.NotErrorIs(t, err, blocks.ErrOutOfBlocks)
}
