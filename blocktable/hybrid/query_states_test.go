package hybrid_test

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/stretchr/testify/require"
)

// seqQuery is what a Manager's queries (Seq, Tokens, Contains) say of one ID, in the terms
// both Managers share.
type seqQuery struct {
	err       error
	state     blocktable.SeqState
	tokens    int
	hit       int
	priority  int
	tokensErr error
	toks      []int32
	contains  bool
}

// sentinel is the class of a query's error: nil, ErrUnknownSeq or ErrNotRunning.
func sentinel(err error) error {
	for _, s := range []error{blocktable.ErrUnknownSeq, blocktable.ErrNotRunning} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// The hybrid Manager's Seq, Tokens, Contains and Seqs answer as blocktable.Manager's do in
// every state an ID can be in: running, swapped out, resumed, preempted in Recompute mode
// (forgotten: the scheduler readmits it), finished (running or swapped out), never
// admitted. Before, the hybrid Manager's Seq and Tokens failed with ErrNotRunning for a
// swapped-out sequence, Contains said false and Seqs left it out, where the plain Manager
// returns its state (Swapped), tokens, hit and priority.
func TestQueriesAgreeInEveryState(t *testing.T) {
	p1, p2 := seqTokens(9, 0), seqTokens(9, 100)
	withTok := append(append([]int32(nil), p1...), 7)
	for _, tc := range []struct {
		name  string
		drive func(t *testing.T, m swapManager)
		want  seqQuery // of seq 1
		seqs  []blocktable.SeqID
	}{
		{"running", func(t *testing.T, m swapManager) {
			require.NoError(t, m.appendTo(1))
		}, seqQuery{state: blocktable.Running, tokens: 10, toks: withTok, contains: true}, []blocktable.SeqID{1, 2}},
		{"swapped", func(t *testing.T, m swapManager) {
			require.NoError(t, m.appendTo(1))
			require.NoError(t, m.swap(1))
		}, seqQuery{state: blocktable.Swapped, tokens: 10, toks: withTok, contains: true}, []blocktable.SeqID{1, 2}},
		{"resumed", func(t *testing.T, m swapManager) {
			require.NoError(t, m.appendTo(1))
			require.NoError(t, m.swap(1))
			require.NoError(t, m.resume(1))
		}, seqQuery{state: blocktable.Running, tokens: 10, toks: withTok, contains: true, hit: 8}, []blocktable.SeqID{2, 1}},
		{"swapped after a hit", func(t *testing.T, m swapManager) {
			require.NoError(t, m.finish(1))
			require.NoError(t, m.admit(1, p1))
			require.NoError(t, m.swap(1))
		}, seqQuery{state: blocktable.Swapped, tokens: 9, toks: p1, contains: true, hit: 8}, []blocktable.SeqID{2, 1}},
		{"preempted (recompute)", func(t *testing.T, m swapManager) {
			require.NoError(t, m.preempt(1))
		}, seqQuery{err: blocktable.ErrUnknownSeq, tokensErr: blocktable.ErrUnknownSeq}, []blocktable.SeqID{2}},
		{"finished", func(t *testing.T, m swapManager) {
			require.NoError(t, m.finish(1))
		}, seqQuery{err: blocktable.ErrUnknownSeq, tokensErr: blocktable.ErrUnknownSeq}, []blocktable.SeqID{2}},
		{"finished while swapped", func(t *testing.T, m swapManager) {
			require.NoError(t, m.swap(1))
			require.NoError(t, m.finish(1))
		}, seqQuery{err: blocktable.ErrUnknownSeq, tokensErr: blocktable.ErrUnknownSeq}, []blocktable.SeqID{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]seqQuery{}
			for name, build := range map[string]func(*testing.T) swapManager{"plain": plainSwapManager, "hybrid": hybridSwapManager} {
				m := build(t)
				require.NoError(t, m.admit(1, p1))
				require.NoError(t, m.admit(2, p2))
				tc.drive(t, m)
				require.NoError(t, m.check())
				q := m.query(1)
				var se *blocktable.SeqError
				if q.err != nil {
					require.ErrorAs(t, q.err, &se, name)
					require.Equal(t, blocktable.SeqID(1), se.Seq, name)
					require.ErrorAs(t, q.tokensErr, &se, name)
				}
				q.err, q.tokensErr = sentinel(q.err), sentinel(q.tokensErr)
				require.Equal(t, tc.want, q, name)
				require.Equal(t, tc.seqs, m.seqs(), "%s: Seqs", name)
				never := m.query(99)
				require.ErrorIs(t, never.err, blocktable.ErrUnknownSeq, name)
				require.ErrorIs(t, never.tokensErr, blocktable.ErrUnknownSeq, name)
				require.False(t, never.contains, name)
				got[name] = q
			}
			require.Equal(t, got["plain"], got["hybrid"])
		})
	}
}
