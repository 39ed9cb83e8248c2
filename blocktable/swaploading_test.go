package blocktable

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A sequence swapped out while its own load is in flight holds only its device hit (the
// loading blocks have no KV yet) and its load's completion is no longer its own: the
// blocks went back to the pool when the load released them. CompleteTransfer reported
// the load as the swapped sequence's (Loaded, counting LoadedTokens for KV it dropped).
func TestSwapWhileLoading(t *testing.T) {
	for _, ok := range []bool{true, false} {
		s := newSwapStack(t, 12, 8, nil, false)
		_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 17)})
		require.NoError(t, err)
		_, err = s.m.PreemptSeq(1, Swap)
		require.NoError(t, err)
		s.completeAll(t, true)
		require.NoError(t, s.m.Abort(1))
		_, err = s.m.Admit(2, &Request{Prompt: prompt(10, 17)}) // loads the 4 blocks back
		require.NoError(t, err)
		plans := s.m.TakePlans(nil)
		require.Len(t, plans, 1)
		before := s.m.Stats()
		_, err = s.m.PreemptSeq(2, Swap)
		require.NoError(t, err)
		require.Zero(t, s.m.Stats().HostInUse-before.HostInUse, "nothing past the (empty) device hit is held")
		d, err := s.m.CompleteTransfer(plans[0].ID, ok)
		require.NoError(t, err)
		require.False(t, d.Loaded, "the load is no longer the swapped sequence's")
		require.Zero(t, d.ComputeTokens)
		require.Equal(t, before.LoadedTokens, s.m.Stats().LoadedTokens)
		require.Equal(t, before.LoadFailedTokens, s.m.Stats().LoadFailedTokens)
		res, err := s.m.Resume(2)
		require.NoError(t, err)
		if ok {
			require.Equal(t, 16, res.LoadTokens, "the load's blocks landed in the tier's copy")
		}
		s.completeAll(t, true)
		s.done(t)
	}
}
