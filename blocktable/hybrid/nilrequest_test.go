package hybrid_test

import (
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// matchOf is m.MatchRequest(req), which must succeed.
func matchOf(t *testing.T, m *hybrid.Manager, req *hybrid.Request) int {
	t.Helper()
	hit, err := m.MatchRequest(req)
	require.NoError(t, err)
	return hit
}

// The lookups refuse a nil request (or explanation) as Admit does, with
// blocktable.ErrInvalidArgument and no change, instead of panicking.
func TestLookupsRefuseNil(t *testing.T) {
	var e prefix.Explanation
	req := &hybrid.Request{Prompt: seqTokens(8, 0), MaxTokens: 8}
	for _, c := range []struct {
		name string
		call func(m *hybrid.Manager) (int, error)
	}{
		{"admit nil", func(m *hybrid.Manager) (int, error) { return m.Admit(9, nil) }},
		{"match request nil", func(m *hybrid.Manager) (int, error) { return m.MatchRequest(nil) }},
		{"match tiers nil", func(m *hybrid.Manager) (int, error) {
			hit, load, err := m.MatchTiers(nil)
			return hit + load, err
		}},
		{"explain nil request", func(m *hybrid.Manager) (int, error) { return m.Explain(nil, &e) }},
		{"explain nil explanation", func(m *hybrid.Manager) (int, error) { return m.Explain(req, nil) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := twoGroups(t, 16)
			_, err := m.Admit(1, req)
			require.NoError(t, err)
			before := m.Stats()
			var hit int
			require.NotPanics(t, func() { hit, err = c.call(m) })
			require.ErrorIs(t, err, blocktable.ErrInvalidArgument)
			require.Zero(t, hit)
			require.Equal(t, before, m.Stats())
			require.NoError(t, m.CheckInvariants())
		})
	}
}
