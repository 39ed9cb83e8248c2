package hybrid_test

import (
	"math"
	"runtime"
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

// TestAdmitHugeMaxTokensAllocatesByThePool: a legal but huge MaxTokens (up to
// math.MaxInt32) must not allocate its tokens and tables up front (8 GiB of tokens at
// MaxInt32): admission sizes them for what the pool can hold. A model whose every group
// releases early (a sliding window alone) runs past that, growing as it goes.
func TestAdmitHugeMaxTokensAllocatesByThePool(t *testing.T) {
	for _, c := range []struct {
		name   string
		groups []hybrid.Spec
		steps  int // decode steps after admission
	}{
		{"full attention and a window", []hybrid.Spec{hybrid.FullAttention{Block: 16}, hybrid.SlidingWindow{Block: 16, Window: 32}}, 100},
		{"a window alone runs past the pool", []hybrid.Spec{hybrid.SlidingWindow{Block: 16, Window: 32}}, 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := hybrid.New(hybrid.Config{Groups: c.groups, NumBlocks: 17}) // 256 tokens
			require.NoError(t, err)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err = m.Admit(1, &hybrid.Request{Prompt: seqTokens(20, 0), MaxTokens: math.MaxInt32})
			require.NoError(t, err)
			runtime.ReadMemStats(&after)
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated by one admission")
			for i := range c.steps {
				require.NoError(t, m.Append(1, []int32{int32(i)}))
			}
			toks, err := m.Tokens(1)
			require.NoError(t, err)
			require.Len(t, toks, 20+c.steps)
			require.NoError(t, m.CheckInvariants())
		})
	}
}
