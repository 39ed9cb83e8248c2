package hybrid

import (
	"testing"

	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// With lower tiers, CheckInvariants asserts the form of full attention's downward closure
// that tiers keep (it asserted none): a full-attention block on the device below a parent
// no tier holds is a broken tree. Here the parent's device block is uncached behind the
// Manager's back, with nothing in the host.
func TestCheckInvariantsFullAttentionClosureWithTiers(t *testing.T) {
	m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}}, NumBlocks: 8,
		Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 8, Write: prefix.WriteBack}}, BlockBytes: 64}})
	require.NoError(t, err)
	_, err = m.Admit(1, &Request{Prompt: toks(0, 9), MaxTokens: 12})
	require.NoError(t, err)
	tb, err := m.Table(1, 0)
	require.NoError(t, err)
	require.NoError(t, m.Finish(1))
	require.NoError(t, m.CheckInvariants())
	require.NoError(t, m.st.t.Uncache(tb[0]), "the parent's block, dropped without the Manager's count")
	require.ErrorContains(t, m.CheckInvariants(), "cached below a parent no tier holds")
}
