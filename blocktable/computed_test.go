package blocktable

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// heldAfterSwap swaps seq out and returns how many blocks it holds in the tiers and the
// Preempted record.
func heldAfterSwap(t *testing.T, s *stack, seq SeqID) (int, Preempted) {
	t.Helper()
	p, err := s.m.PreemptSeq(seq, Swap)
	require.NoError(t, err)
	require.NoError(t, s.m.CheckInvariants())
	return s.m.Stats().HostInUse, p
}

// Swap copies only blocks whose KV the server has computed. Blocks given slots in the
// current step (since the last NewStep) hold no KV until its forward pass runs: a
// sequence swapped out in the step that admitted it, or that filled a block with this
// step's token, held and copied them anyway (4 blocks of a prompt never computed, and a
// block whose last slot was not written).
func TestSwapCopiesOnlyComputedBlocks(t *testing.T) {
	t.Run("admitted this step", func(t *testing.T) {
		s := newSwapStack(t, 12, 8, nil, false)
		s.m.NewStep()
		_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 17)}) // 4 full blocks and a token
		require.NoError(t, err)
		held, p := heldAfterSwap(t, s, 1)
		require.Zero(t, held, "no block of the prompt has KV yet")
		require.Zero(t, p.Awaiting)
		require.Equal(t, 5, p.Freed, "its blocks are free (or evictable) at once")
		require.Empty(t, s.m.TakePlans(nil), "nothing to copy")
		res, err := s.m.Resume(1)
		require.NoError(t, err)
		require.Zero(t, res.LoadTokens)
		s.done(t)
	})
	t.Run("admitted last step", func(t *testing.T) {
		s := newSwapStack(t, 12, 8, nil, false)
		s.m.NewStep()
		_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 17)})
		require.NoError(t, err)
		s.m.NewStep() // the prefill ran
		held, _ := heldAfterSwap(t, s, 1)
		require.Equal(t, 4, held)
		s.completeAll(t, true)
		res, err := s.m.Resume(1)
		require.NoError(t, err)
		require.Equal(t, 16, res.LoadTokens)
		s.completeAll(t, true)
		s.done(t)
	})
	t.Run("a decode token filled a block this step", func(t *testing.T) {
		for _, path := range []string{"fast", "slow", "AppendToken"} {
			s := newSwapStack(t, 12, 8, nil, false)
			s.m.NewStep()
			_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 15)}) // 3 full blocks and 3 tokens
			require.NoError(t, err)
			s.m.NewStep()
			if path == "slow" { // another sequence's call in between: Append takes its slow path
				_, err = s.m.Admit(2, &Request{Prompt: prompt(900, 2)})
				require.NoError(t, err)
			} else { // the sequence the last call named: the decode fast path
				_, err = s.m.Seq(1)
				require.NoError(t, err)
			}
			if path == "AppendToken" {
				_, err = s.m.AppendToken(1, 99)
			} else {
				_, err = s.m.Append(1, []int32{99}, 0) // fills block 4; its KV lands this step
			}
			require.NoError(t, err)
			held, _ := heldAfterSwap(t, s, 1)
			require.Equal(t, 3, held, "block 4's last slot holds no KV yet (%s)", path)
			s.done(t)
		}
	})
	t.Run("a decode token in the partial block", func(t *testing.T) {
		s := newSwapStack(t, 12, 8, nil, false)
		s.m.NewStep()
		_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 17)})
		require.NoError(t, err)
		s.m.NewStep()
		_, err = s.m.Append(1, []int32{99}, 0) // into the partial last block, which no swap copies
		require.NoError(t, err)
		held, _ := heldAfterSwap(t, s, 1)
		require.Equal(t, 4, held)
		s.done(t)
	})
	t.Run("loaded this step", func(t *testing.T) {
		s := newSwapStack(t, 12, 8, nil, false)
		_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 17)})
		require.NoError(t, err)
		_, err = s.m.PreemptSeq(1, Swap)
		require.NoError(t, err)
		s.completeAll(t, true)
		s.m.NewStep()
		res, err := s.m.Resume(1) // the 4 blocks load; the partial one is computed
		require.NoError(t, err)
		require.Equal(t, 16, res.LoadTokens)
		s.completeAll(t, true) // the load lands: its blocks have KV
		held, _ := heldAfterSwap(t, s, 1)
		require.Equal(t, 4, held, "the loaded blocks are computed")
		s.done(t)
	})
	t.Run("without NewStep, every slot is taken as computed", func(t *testing.T) {
		s := newSwapStack(t, 12, 8, nil, false)
		_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 17)})
		require.NoError(t, err)
		held, _ := heldAfterSwap(t, s, 1)
		require.Equal(t, 4, held, "the contract before NewStep")
		s.completeAll(t, true)
		s.done(t)
	})
}

// A fork shares its parent's blocks and what of them is computed.
func TestForkKeepsWhatIsComputed(t *testing.T) {
	s := newSwapStack(t, 16, 8, nil, false)
	s.m.NewStep()
	_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 17)})
	require.NoError(t, err)
	require.NoError(t, s.m.Fork(1, 2))
	held, _ := heldAfterSwap(t, s, 2)
	require.Zero(t, held, "the child's blocks are the parent's, not computed yet")
	s.done(t)
}

// A Truncate after a block filled in this step, and an Append that fills blocks again in
// the same step: the tokens past the cut are new, given slots this step, and hold no KV.
// The record of what is computed (fresh) kept the length noted before the cut, so that
// the swap held a block refilled with tokens no forward pass had computed.
func TestSwapAfterTruncateThisStepCopiesOnlyComputedBlocks(t *testing.T) {
	s := newSwapStack(t, 12, 8, nil, false)
	s.m.NewStep()
	_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 9)}) // 2 full blocks and a token
	require.NoError(t, err)
	s.m.NewStep()                             // the prefill ran: 9 tokens computed
	_, err = s.m.Append(1, prompt(500, 3), 0) // fills the third block: 8 tokens computed
	require.NoError(t, err)
	require.NoError(t, s.m.Truncate(1, 4))    // only the first block's tokens are left
	_, err = s.m.Append(1, prompt(900, 8), 0) // two blocks again, given slots this step
	require.NoError(t, err)
	held, _ := heldAfterSwap(t, s, 1)
	require.Equal(t, 1, held, "only the first block has KV")
	s.completeAll(t, true)
	s.done(t)
}
