package hybrid_test

import (
	"math"
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/stretchr/testify/require"
)

// TestAdmitRefusesMaxTokensThatOverflow: sizing a sequence's tables from MaxTokens must
// not overflow (or allocate by a declared length past any position an int32 token index
// reaches); Admit refuses with a SizeError and changes nothing.
func TestAdmitRefusesMaxTokensThatOverflow(t *testing.T) {
	m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
		hybrid.FullAttention{Block: 16}, hybrid.SlidingWindow{Block: 16, Window: 32},
	}, NumBlocks: 9})
	require.NoError(t, err)
	for _, mt := range []int{math.MaxInt, math.MaxInt - 3, 1 << 40} {
		before := m.Stats()
		_, err := m.Admit(1, &hybrid.Request{Prompt: seqTokens(4, 0), MaxTokens: mt})
		require.ErrorIs(t, err, blocktable.ErrTooLarge, "max tokens %d", mt)
		require.ErrorIs(t, err, blocktable.ErrInvalidArgument)
		require.Equal(t, before, m.Stats())
		require.False(t, m.Contains(1))
	}
	require.NoError(t, m.CheckInvariants())
}
