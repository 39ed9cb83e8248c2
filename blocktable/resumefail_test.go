package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// everything is all a failed call may not change: the Manager's observable state and
// Stats, the index's statistics, every tier's, and the swapped sequence's hold.
type everything struct {
	State state
	Index prefix.Stats
	Tiers []prefix.TierStats
	Held  int
}

func (s *stack) everything(t *testing.T, swapped SeqID) everything {
	t.Helper()
	require.NoError(t, s.m.CheckInvariants())
	e := everything{State: s.state(t), Index: s.idx.Stats()}
	for tier := range s.idx.NumTiers() {
		e.Tiers = append(e.Tiers, s.idx.TierStatsOf(prefix.Tier(tier)))
	}
	if sq, ok := s.m.seqs[swapped]; ok {
		e.Held = s.idx.HeldBlocks(sq.hold)
	}
	return e
}

// A Resume that fails leaves every counter and all state as before, for each way it can
// fail, and names Resume in its error; the sequence stays swapped out and resumes once
// the cause is gone.
func TestResumeFailureChangesNothing(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, s *stack) SeqID // returns the ID to resume
		want  error
		fix   func(t *testing.T, s *stack)
	}{
		{"unknown sequence", func(t *testing.T, s *stack) SeqID { return 99 }, ErrUnknownSeq, nil},
		{"running", func(t *testing.T, s *stack) SeqID {
			_, err := s.m.Admit(2, &Request{Prompt: prompt(500, 3)})
			require.NoError(t, err)
			return 2
		}, ErrNotRunning, nil},
		{"out of blocks", func(t *testing.T, s *stack) SeqID {
			_, err := s.m.Admit(2, &Request{Prompt: prompt(500, 32)}) // every device block
			require.NoError(t, err)
			return 1
		}, blocks.ErrOutOfBlocks, func(t *testing.T, s *stack) { require.NoError(t, s.m.Finish(2)) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newTieredStack(t, 8, 4, 8, 0)
			_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 13)})
			require.NoError(t, err)
			_, err = s.m.PreemptSeq(1, Swap)
			require.NoError(t, err)
			s.completeAll(t, true)
			id := c.setup(t, s)
			before := s.everything(t, 1)
			_, err = s.m.Resume(id)
			require.ErrorIs(t, err, c.want)
			require.Equal(t, before, s.everything(t, 1))
			var se *SeqError
			require.ErrorAs(t, err, &se)
			require.Equal(t, "resume", se.Op)
			require.Equal(t, id, se.Seq)
			if c.fix != nil {
				c.fix(t, s)
				res, err := s.m.Resume(id)
				require.NoError(t, err)
				require.Equal(t, 12, res.LoadTokens, "its KV was kept")
				s.completeAll(t, true)
			}
			s.done(t)
		})
	}
}

// The tokens' slice of a sequence grows by doubling, past the pool's slots; Resume passed
// its capacity to Admit as MaxTokens, which refused it as too large (ErrTooLarge) though
// the pool had room: a swapped sequence that could never resume.
func TestResumeAfterTokensOutgrewThePool(t *testing.T) {
	s := newTieredStack(t, 8, 4, 8, 0) // 32 slots
	_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 20)})
	require.NoError(t, err)
	_, err = s.m.Append(1, []int32{99}, 0) // the slice doubles its capacity to 40
	require.NoError(t, err)
	require.Greater(t, cap(s.m.seqs[1].tokens), s.m.maxSlots, "the case under test")
	_, err = s.m.PreemptSeq(1, Swap)
	require.NoError(t, err)
	s.completeAll(t, true)
	res, err := s.m.Resume(1)
	require.NoError(t, err)
	require.Equal(t, 20, res.LoadTokens)
	require.Equal(t, 21, res.Tokens)
	s.completeAll(t, true)
	s.done(t)
}
