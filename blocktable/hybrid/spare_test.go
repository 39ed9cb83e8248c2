package hybrid_test

import (
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/stretchr/testify/require"
)

// The spare sequence records used to keep a record, with its token, path and table
// buffers, for the most sequences ever alive at once, for as long as the Manager lived.
// They now keep at most one more than the Manager has sequences, running and swapped
// out: a burst leaves one record behind once its sequences are gone, however they left.
func TestHybridSpareRecordsAreBounded(t *testing.T) {
	const n = 8
	burst := func(t *testing.T) *hybrid.Manager {
		m := swapAllocManager(t)
		for i := range n {
			_, err := m.Admit(blocktable.SeqID(i+1), &hybrid.Request{Prompt: seqTokens(9, int32(100*i)), MaxTokens: 40})
			require.NoError(t, err)
		}
		return m
	}
	t.Run("finished", func(t *testing.T) {
		m := burst(t)
		for i := range n {
			require.NoError(t, m.Finish(blocktable.SeqID(i+1)))
			require.LessOrEqual(t, m.SpareRecords(), n-i, "after seq %d", i+1)
			require.NoError(t, m.CheckInvariants())
		}
		require.Equal(t, 1, m.SpareRecords())
	})
	t.Run("finished while swapped", func(t *testing.T) {
		m := burst(t)
		for i := range n {
			_, err := m.PreemptSeq(blocktable.SeqID(i+1), blocktable.Swap)
			require.NoError(t, err)
			completeAll(t, m, true)
		}
		require.Equal(t, n, m.SpareRecords(), "a record for each swapped sequence's Resume")
		for i := range n {
			require.NoError(t, m.Finish(blocktable.SeqID(i+1)))
			require.LessOrEqual(t, m.SpareRecords(), n-i, "after seq %d", i+1)
			require.NoError(t, m.CheckInvariants())
		}
		require.Equal(t, 1, m.SpareRecords())
	})
}

// A record the spare list drops gives its Freeable slot back: with a policy that reads
// Freeable, bursts of sequences reuse the slots, so the accounting's rows stay sized for
// the largest burst rather than grow with every record made.
func TestHybridDroppedRecordsReuseTheirSlots(t *testing.T) {
	const n = 8
	m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{hybrid.FullAttention{Block: 4}},
		NumBlocks: 64, Preemption: evict.NewCostPreemption()})
	require.NoError(t, err)
	for round := range 3 {
		for i := range n {
			_, err := m.Admit(blocktable.SeqID(i+1), &hybrid.Request{Prompt: seqTokens(9, int32(100*i)), MaxTokens: 40})
			require.NoError(t, err)
		}
		for i := range n {
			require.NoError(t, m.Finish(blocktable.SeqID(i+1)))
		}
		require.NoError(t, m.CheckInvariants())
		require.Equal(t, n, m.Slots(), "round %d", round)
	}
}

// A batch that turns over, one sequence finished and another admitted in its place,
// still reuses a record each admission.
func TestHybridTurnoverAllocatesNothing(t *testing.T) {
	if invariant.Enabled {
		t.Skip("the invariant checks (kvinvariants, -race) allocate")
	}
	const batch = 4
	m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
		hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 4},
	}, NumBlocks: 64})
	require.NoError(t, err)
	req := &hybrid.Request{Prompt: seqTokens(9, 100), MaxTokens: 40}
	next := blocktable.SeqID(1)
	for range batch {
		_, err := m.Admit(next, req)
		require.NoError(t, err)
		next++
	}
	turn := func() {
		if err := m.Finish(next - batch); err != nil {
			panic(err)
		}
		if _, err := m.Admit(next, req); err != nil {
			panic(err)
		}
		next++
	}
	turn()
	require.Zero(t, testing.AllocsPerRun(200, turn))
}
