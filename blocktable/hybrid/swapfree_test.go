package hybrid_test

import (
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/stretchr/testify/require"
)

// The swap free list kept a record, with its token buffer, for the most sequences ever
// swapped out at once, for as long as the Manager lived. It now keeps at most as many as
// the Manager has sequences, running and swapped: a burst of swaps leaves nothing behind
// once its sequences are gone, and a steady swap cycle still finds every record it needs
// (TestHybridSwapAllocatesNothing).
func TestHybridSwapFreeListIsBounded(t *testing.T) {
	const n = 8
	burst := func(t *testing.T) *hybrid.Manager {
		m := swapAllocManager(t)
		for i := range n {
			_, err := m.Admit(blocktable.SeqID(i+1), &hybrid.Request{Prompt: seqTokens(9, int32(100*i)), MaxTokens: 40})
			require.NoError(t, err)
		}
		for i := range n {
			_, err := m.PreemptSeq(blocktable.SeqID(i+1), blocktable.Swap)
			require.NoError(t, err)
			completeAll(t, m, true)
		}
		return m
	}
	t.Run("resumed, then finished", func(t *testing.T) {
		m := burst(t)
		for i := range n {
			_, err := m.Resume(blocktable.SeqID(i + 1))
			require.NoError(t, err)
			completeAll(t, m, true)
		}
		require.Equal(t, n, m.SwapFree(), "a record for each live sequence")
		for i := range n {
			require.NoError(t, m.Finish(blocktable.SeqID(i+1)))
			require.LessOrEqual(t, m.SwapFree(), n-1-i, "no more than the sequences left")
			require.NoError(t, m.CheckInvariants())
		}
		require.Zero(t, m.SwapFree())
	})
	t.Run("finished while swapped", func(t *testing.T) {
		m := burst(t)
		for i := range n - 1 {
			require.NoError(t, m.Finish(blocktable.SeqID(i+1)))
			require.NoError(t, m.CheckInvariants())
		}
		require.LessOrEqual(t, m.SwapFree(), 1, "one sequence left")
		_, err := m.Resume(n)
		require.NoError(t, err)
		completeAll(t, m, true)
		require.NoError(t, m.Finish(n))
		require.Zero(t, m.SwapFree())
		require.NoError(t, m.CheckInvariants())
	})
}
