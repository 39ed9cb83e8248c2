package hybrid

import (
	"testing"

	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// CheckInvariants holds full attention's downward closure for a group whose block spans
// several match units too: its parent block is that many nodes up, and the nodes between
// hold no block of the group. Before, it checked only groups of one unit per block, so a
// block of 8 tokens over units of 4 left below an uncached parent (the state the walks
// 0c37592 fixed left behind) passed. The parent's device block is uncached behind the
// Manager's back, with nothing in a lower tier; the child's is at once a closure break.
func TestCheckInvariantsClosureOfBlocksOfSeveralUnits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		unit  int
		tiers bool
	}{
		{"one unit per block", 8, false},
		{"two units per block", 4, false},
		{"four units per block", 2, false},
		{"two units per block, with tiers", 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Groups: []Spec{FullAttention{Block: 8}}, NumBlocks: 8, MatchUnit: tc.unit}
			if tc.tiers {
				cfg.Tiers = &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 8, Write: prefix.WriteBack}}, BlockBytes: 64}
			}
			m, err := New(cfg)
			require.NoError(t, err)
			_, err = m.Admit(1, &Request{Prompt: toks(0, 17), MaxTokens: 20})
			require.NoError(t, err)
			tb, err := m.Table(1, 0)
			require.NoError(t, err)
			require.NoError(t, m.Finish(1))
			require.NoError(t, m.CheckInvariants())
			require.Empty(t, m.ClosureBreaks())
			require.NoError(t, m.st.t.Uncache(tb[0]), "the parent's block, dropped without the Manager's count")
			require.ErrorContains(t, m.CheckInvariants(), "cached below a parent no tier holds")
			require.Equal(t, tb[1:2], m.ClosureBreaks())
		})
	}
}
