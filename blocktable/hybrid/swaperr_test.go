package hybrid_test

import (
	"fmt"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A Swap refused because tier 1 is full names the sequence it is about, as
// blocktable.Manager's does: the victim at which the victims' blocks pass the room
// (Preempt), or the one asked for (PreemptSeq), in a *blocktable.SeqError (Op "swap
// out"), and errors.Is / errors.As still find prefix.ErrTierFull and its figures. Nothing
// changes. Seq 1 (one full block per group, the newest: fcfs's first victim) fits the
// host tier of 3 blocks; seq 2 (four per group) does not. Preempt named no sequence.
func TestHybridSwapRefusedNamesTheSequence(t *testing.T) {
	pols := map[string]evict.Preemption{"fcfs": nil, "cost": evict.NewCostPreemption()}
	for name, pol := range pols {
		t.Run(name, func(t *testing.T) {
			m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
				hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 4},
			}, NumBlocks: 30, Preemption: pol,
				Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 3}}, BlockBytes: 64}})
			require.NoError(t, err)
			_, err = m.Admit(2, &hybrid.Request{Prompt: seqTokens(17, 100), MaxTokens: 20})
			require.NoError(t, err)
			_, err = m.Admit(1, &hybrid.Request{Prompt: seqTokens(5, 10), MaxTokens: 8})
			require.NoError(t, err)
			one, err := m.Freeable(1)
			require.NoError(t, err)
			before := m.Stats()

			// Both must go: seq 1's two cached blocks and seq 2's eight. Seq 1 alone fits.
			_, err = m.Preempt(blocktable.PreemptRequest{Need: one + 1, Mode: blocktable.Swap}, nil)
			requireSwapTierFull(t, err, 2, 10, 3)
			require.Equal(t, before, m.Stats())
			require.Zero(t, m.PendingTransfers(), "no copy prepared")
			require.False(t, m.Swapped(1) || m.Swapped(2))

			_, err = m.PreemptSeq(2, blocktable.Swap)
			requireSwapTierFull(t, err, 2, 8, 3)
			require.Equal(t, before, m.Stats())

			_, err = m.PreemptSeq(1, blocktable.Swap)
			require.NoError(t, err, "seq 1 alone fits")
			require.True(t, m.Swapped(1))
			require.NoError(t, m.CheckInvariants())
		})
	}
}

func requireSwapTierFull(t *testing.T, err error, seq blocktable.SeqID, need, room int) {
	t.Helper()
	require.ErrorIs(t, err, prefix.ErrTierFull)
	var se *blocktable.SeqError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "swap out", se.Op)
	require.Equal(t, seq, se.Seq)
	var tf *prefix.TierFullError
	require.ErrorAs(t, err, &tf)
	require.Equal(t, prefix.TierFullError{Requested: need, Available: room}, *tf)
	require.NotErrorIs(t, err, blocks.ErrOutOfBlocks)
}

// A *prefix.TierFullError that reaches the swap's refusal wrapped (a tier of the future
// that adds context) is still found, with errors.As, and the refusal still names the
// victim: before, swapRefused type-asserted the bare pointer and passed a wrapped one on
// as it was, naming no sequence. Any other error passes through unchanged.
func TestHybridSwapRefusedFindsAWrappedTierFull(t *testing.T) {
	m := tiered(t, prefix.TierSpec{Capacity: 3}, 0)
	_, err := m.Admit(4, &hybrid.Request{Prompt: seqTokens(9, 0), MaxTokens: 12})
	require.NoError(t, err)
	full := &prefix.TierFullError{Requested: 6, Available: 3}
	for name, in := range map[string]error{"bare": full, "wrapped": fmt.Errorf("host tier: %w", full)} {
		t.Run(name, func(t *testing.T) {
			requireSwapTierFull(t, m.SwapRefused(4, in), 4, 6, 3)
			require.ErrorIs(t, m.SwapRefused(4, in), in, "the refusal wraps the error it was given")
		})
	}
	other := fmt.Errorf("x: %w", prefix.ErrNoTiers)
	require.Same(t, other, m.SwapRefused(4, other))
}
