package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// In stream mode a swap's copies release their device blocks when TakePlans hands them
// out (they stay cached until an allocation takes them), and their tier slots are found
// only once CompleteTransfer confirms them. A Resume once the blocks are evicted and
// before the confirmation computed the 4 blocks in flight again (LoadTokens 0, 5 new
// blocks); it now waits (ErrSwapInFlight, nothing changed) and, once the copy is
// confirmed, loads them. Before the device evicts them, and in the default mode, the
// blocks are still on the device and Resume hits them there.
func TestResumeWaitsForStreamOrderedCopies(t *testing.T) {
	s := newSwapStack(t, 12, 8, nil, true)
	_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 17)}) // 4 full blocks and a token
	require.NoError(t, err)
	_, err = s.m.PreemptSeq(1, Swap)
	require.NoError(t, err)
	plans := s.m.TakePlans(nil)
	require.Len(t, plans, 1)
	require.Equal(t, 4, plans[0].Blocks)
	require.Zero(t, s.idx.HoldInFlight(s.m.seqs[1].hold), "still cached on the device")
	require.Equal(t, 4, s.idx.Evict(4), "an allocation's reclaim takes them")
	require.Equal(t, 4, s.idx.HoldInFlight(s.m.seqs[1].hold))

	before := s.everything(t, 1)
	_, err = s.m.Resume(1)
	require.ErrorIs(t, err, ErrSwapInFlight)
	var se *SeqError
	require.ErrorAs(t, err, &se)
	require.Equal(t, SeqID(1), se.Seq)
	require.Equal(t, before, s.everything(t, 1), "a refused Resume changes nothing")

	_, err = s.m.CompleteTransfer(plans[0].ID, true)
	require.NoError(t, err)
	require.Zero(t, s.idx.HoldInFlight(s.m.seqs[1].hold))
	res, err := s.m.Resume(1)
	require.NoError(t, err)
	require.Equal(t, 16, res.LoadTokens, "loaded from the confirmed copy, not computed")
	require.Equal(t, 1, res.NewBlocks-res.LoadTokens/4, "only the partial block is computed")
	s.completeAll(t, true)
	s.done(t)
}

// Without StreamOrdered, or before the device evicts the blocks whose copies TakePlans
// handed out, the blocks are still on the device: Resume takes them as a device hit and
// does not wait.
func TestResumeBeforeCopiesLeaveTheDevice(t *testing.T) {
	for _, c := range []struct {
		name   string
		stream bool
		take   bool
	}{{"stream, before TakePlans", true, false}, {"stream, copy handed out", true, true}, {"default, copy handed out", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			s := newSwapStack(t, 12, 8, nil, c.stream)
			_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 17)})
			require.NoError(t, err)
			_, err = s.m.PreemptSeq(1, Swap)
			require.NoError(t, err)
			var plans []prefix.Plan
			if c.take {
				plans = s.m.TakePlans(nil)
				require.Len(t, plans, 1)
			}
			require.Zero(t, s.idx.HoldInFlight(s.m.seqs[1].hold))
			res, err := s.m.Resume(1)
			require.NoError(t, err)
			require.Equal(t, 16, res.HitTokens, "a device hit")
			for _, p := range plans {
				_, err := s.m.CompleteTransfer(p.ID, true)
				require.NoError(t, err)
			}
			s.completeAll(t, true)
			s.done(t)
		})
	}
}
