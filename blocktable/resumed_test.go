package blocktable

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A preempted request admitted again re-hits its own blocks; counted with fresh
// admissions it would flatter the hit rate (vLLM #25780). Resumed admissions are counted
// apart, in the Manager's stats and in the index's.
func TestResumedAdmissionsCountedApart(t *testing.T) {
	s := newStack(t, 16, 4, Config{})
	prompt := seqOf(13, 1) // three full blocks and one token
	_, err := s.m.Admit(1, &Request{Prompt: prompt})
	require.NoError(t, err)
	_, err = s.m.PreemptSeq(1, Recompute)
	require.NoError(t, err)

	res, err := s.m.Admit(1, &Request{Prompt: prompt, Resumed: true})
	require.NoError(t, err)
	require.Equal(t, 12, res.HitTokens, "its own three blocks")

	st := s.m.Stats()
	require.Equal(t, uint64(13), st.PromptTokens)
	require.Equal(t, uint64(0), st.HitTokens, "the fresh admission had no hit")
	require.Equal(t, uint64(1), st.ResumedAdmitted)
	require.Equal(t, uint64(13), st.ResumedPromptTokens)
	require.Equal(t, uint64(12), st.ResumedHitTokens)
	require.Equal(t, uint64(2), st.Admitted)
	require.Zero(t, st.HitRate())

	is := s.idx.Stats()
	require.Equal(t, uint64(1), is.Lookups)
	require.Equal(t, uint64(0), is.HitTokens)
	require.Equal(t, uint64(1), is.ResumedLookups)
	require.Equal(t, uint64(13), is.ResumedLookedUpTokens)
	require.Equal(t, uint64(12), is.ResumedHitTokens)
	require.Equal(t, s.pool.NumFree(), is.Free)
	s.done(t)
}
