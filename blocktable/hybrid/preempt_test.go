package hybrid_test

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/evict"
	"github.com/stretchr/testify/require"
)

// threeSeqs admits, over full attention plus a 4-token window (blocks of 4 tokens):
// 1: tokens 0-7 (blocks 1 2 | 3 4), 2: tokens 100-107 (5 6 | 7 8), 3: tokens 0-11, which
// hits 8 tokens of 1 (1 2 9 | null 4 10). Alone, 1 frees 1 block (3), 2 frees 4, 3 frees 2.
func threeSeqs(t *testing.T, policy evict.Preemption) *hybrid.Manager {
	m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
		hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 4},
	}, NumBlocks: 20, Preemption: policy})
	require.NoError(t, err)
	for _, r := range []struct {
		id       blocktable.SeqID
		prompt   []int32
		priority int
	}{{1, seqTokens(8, 0), 5}, {2, seqTokens(8, 100), 0}, {3, seqTokens(12, 0), 0}} {
		_, err := m.Admit(r.id, &hybrid.Request{Prompt: r.prompt, MaxTokens: 16, Priority: r.priority})
		require.NoError(t, err)
	}
	require.Equal(t, [][]blocks.ID{{1, 2, 9}, {0, 4, 10}}, tables(t, m, 3))
	return m
}

func TestPreempt(t *testing.T) {
	for _, c := range []struct {
		name    string
		policy  evict.Preemption
		need    int
		protect []blocktable.SeqID
		victims []blocktable.SeqID
		freed   []int
		short   int // when > 0: refused, all candidates would free this much
	}{
		{name: "newest frees enough", need: 2, victims: []blocktable.SeqID{3}, freed: []int{2}},
		{name: "two victims", need: 3, victims: []blocktable.SeqID{3, 2}, freed: []int{2, 4}},
		// 1 alone frees 1 block, but after 3 it frees all four it shares with 3.
		{name: "shared blocks come free together", need: 7, victims: []blocktable.SeqID{3, 2, 1}, freed: []int{2, 4, 4}},
		{name: "protected", need: 2, protect: []blocktable.SeqID{3}, victims: []blocktable.SeqID{2}, freed: []int{4}},
		{name: "priority", policy: evict.NewPriorityPreemption(), need: 1, victims: []blocktable.SeqID{1}, freed: []int{1}},
		// cost: recompute per freed block, 8/4 for 2 against 8/1 and 12/2.
		{name: "cost", policy: evict.NewCostPreemption(), need: 1, victims: []blocktable.SeqID{2}, freed: []int{4}},
		{name: "not enough", need: 11, short: 10},
		{name: "not enough protected", need: 9, protect: []blocktable.SeqID{2}, short: 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := threeSeqs(t, c.policy)
			for id, want := range map[blocktable.SeqID]int{1: 1, 2: 4, 3: 2} {
				got, err := m.Freeable(id)
				require.NoError(t, err)
				require.Equal(t, want, got, "freeable %d", id)
			}
			before := m.Stats()
			got, err := m.Preempt(blocktable.PreemptRequest{Need: c.need, Protect: c.protect}, nil)
			if c.short > 0 {
				var oob *blocks.OutOfBlocksError
				require.True(t, errors.As(err, &oob), "%v", err)
				require.Equal(t, c.short, oob.Available)
				require.Empty(t, got)
				require.Equal(t, before, m.Stats(), "nothing changed")
				return
			}
			require.NoError(t, err)
			var ids []blocktable.SeqID
			var freed []int
			total := 0
			for _, p := range got {
				ids, freed = append(ids, p.Seq), append(freed, p.Freed)
				total += p.Freed
				require.False(t, m.Contains(p.Seq))
			}
			require.Equal(t, c.victims, ids)
			require.Equal(t, c.freed, freed)
			require.GreaterOrEqual(t, total, c.need)
			require.Equal(t, before.Free+total, m.Stats().Free)
			require.Equal(t, uint64(len(ids)), m.Stats().Preemptions)
			require.NoError(t, m.CheckInvariants())
		})
	}
}

// Recompute preemption keeps the victim's blocks cached: admitted again with its tokens
// (Resumed), it re-hits them, counted apart from first hits. Swap mode is refused.
func TestPreemptRecomputeRehits(t *testing.T) {
	m := threeSeqs(t, nil)
	require.NoError(t, m.Append(2, []int32{108, 109, 110, 111, 112}))
	toks, err := m.Tokens(2)
	require.NoError(t, err)
	toks = append([]int32(nil), toks...)
	_, err = m.Preempt(blocktable.PreemptRequest{Need: 1, Mode: blocktable.Swap}, nil)
	require.True(t, errors.Is(err, blocktable.ErrNoHostPool), "%v", err)
	_, err = m.PreemptSeq(2, blocktable.Swap)
	require.True(t, errors.Is(err, blocktable.ErrNoHostPool), "%v", err)
	p, err := m.PreemptSeq(2, blocktable.Recompute)
	require.NoError(t, err)
	require.Equal(t, 13, p.Tokens)
	hits := m.Stats().HitTokens
	hit, err := m.Admit(2, &hybrid.Request{Prompt: toks, MaxTokens: 16, Resumed: true})
	require.NoError(t, err)
	require.Equal(t, 12, hit, "its own three full blocks (the 13th token is recomputed)")
	st := m.Stats()
	require.Equal(t, hits, st.HitTokens)
	require.Equal(t, uint64(12), st.ResumedHitTokens)
	require.Equal(t, uint64(13), st.ResumedPromptTokens)
	require.NoError(t, m.CheckInvariants())
}

// twicePolicy names its first candidate twice: a broken user policy.
type twicePolicy struct{}

func (twicePolicy) Name() string { return "twice" }
func (twicePolicy) Victims(dst []int, _ []evict.Candidate, _ int) []int {
	return append(dst, 0, 0)
}

// TestPreemptRefusesAPolicyNamingAVictimTwice: the plan would count the victim's shared
// blocks twice and the second preemption would find it gone; Preempt must refuse with
// ErrInvalidArgument and change nothing, not panic.
func TestPreemptRefusesAPolicyNamingAVictimTwice(t *testing.T) {
	m := threeSeqs(t, twicePolicy{})
	before := m.Stats()
	out, err := m.Preempt(blocktable.PreemptRequest{Need: 2}, nil)
	require.ErrorIs(t, err, blocktable.ErrInvalidArgument)
	require.Empty(t, out)
	require.Equal(t, before, m.Stats())
	for _, id := range []blocktable.SeqID{1, 2, 3} {
		require.True(t, m.Contains(id))
	}
	require.NoError(t, m.CheckInvariants())
}
