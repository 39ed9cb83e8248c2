package hybrid_test

import (
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// resumeState is what a refused Resume must leave as it was.
type resumeState struct {
	stats   hybrid.Stats
	counts  hybrid.TierCounts
	host    prefix.TierStats
	device  prefix.TierStats
	pending int
	swapped bool
	seqs    []blocktable.SeqID
}

func resumeStateOf(m *hybrid.Manager) resumeState {
	return resumeState{stats: m.Stats(), counts: m.TierCounts(), host: m.TierStats(1), device: m.TierStats(prefix.Device),
		pending: m.PendingTransfers(), swapped: m.Swapped(1), seqs: m.Seqs(nil)}
}

// Under StreamOrdered a swap's copies release their device blocks when TakePlans hands
// them out (cached until an allocation takes them), and their tier slots are found only
// once CompleteTransfer confirms them. A Resume once an allocation took the blocks and
// before the confirmation found neither and computed the 8 blocks in flight again; it now
// waits, as blocktable.Manager's does (ErrSwapInFlight in a SeqError, nothing changed),
// and loads them once the copies are confirmed.
func TestHybridResumeWaitsForStreamOrderedCopies(t *testing.T) {
	m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
		hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 4},
	}, NumBlocks: 13, Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 32, Write: prefix.WriteBack}},
		BlockBytes: 64, StreamOrdered: true}})
	require.NoError(t, err)
	p1 := seqTokens(17, 0)
	_, err = m.Admit(1, &hybrid.Request{Prompt: p1, MaxTokens: 20})
	require.NoError(t, err)
	_, err = m.PreemptSeq(1, blocktable.Swap)
	require.NoError(t, err)
	plans := m.TakePlans(nil)
	require.NotEmpty(t, plans)
	require.Equal(t, 16, m.Match(p1), "still cached")
	_, err = m.Admit(2, &hybrid.Request{Prompt: seqTokens(17, 100), MaxTokens: 20})
	require.NoError(t, err)
	require.Zero(t, m.Match(p1), "seq 2's allocation took the kept blocks")
	require.Zero(t, m.TierStats(prefix.Device).Lost, "their copies are in flight")
	require.NoError(t, m.Finish(2))

	before := resumeStateOf(m)
	_, err = m.Resume(1)
	require.ErrorIs(t, err, blocktable.ErrSwapInFlight)
	var se *blocktable.SeqError
	require.ErrorAs(t, err, &se)
	require.Equal(t, blocktable.SeqID(1), se.Seq)
	require.Equal(t, "resume", se.Op)
	require.Equal(t, before, resumeStateOf(m), "a refused Resume changes nothing")
	require.NoError(t, m.CheckInvariants())

	for _, p := range plans {
		_, err := m.CompleteTransfer(p.ID, true)
		require.NoError(t, err)
	}
	r, err := m.Resume(1)
	require.NoError(t, err)
	require.Equal(t, 16, r.LoadTokens, "loaded from the confirmed copies, not computed")
	require.False(t, m.Swapped(1))
	completeAll(t, m, true)
	require.NoError(t, m.Finish(1))
	completeAll(t, m, true)
	require.Equal(t, 12, m.Stats().Free, "nothing leaked")
	require.NoError(t, m.CheckInvariants())
}
