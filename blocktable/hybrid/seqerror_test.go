package hybrid_test

import (
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/stretchr/testify/require"
)

// A refusal about one sequence is a *blocktable.SeqError naming the operation and the
// sequence, as blocktable.Manager's, not a plain wrapper: errors.As finds it.
func TestSeqRefusalsAreSeqErrors(t *testing.T) {
	m := twoGroups(t, 16) // no lower tiers
	_, err := m.Admit(1, &hybrid.Request{Prompt: seqTokens(8, 0), MaxTokens: 8})
	require.NoError(t, err)
	for _, c := range []struct {
		op  string
		seq blocktable.SeqID
		err error
		got error
	}{
		{"resume", 7, blocktable.ErrUnknownSeq, func() error { _, err := m.Resume(7); return err }()},
		{"preempt", 7, blocktable.ErrUnknownSeq, func() error { _, err := m.PreemptSeq(7, blocktable.Recompute); return err }()},
		{"preempt", 1, blocktable.ErrSwapNeedsTiers, func() error { _, err := m.PreemptSeq(1, blocktable.Swap); return err }()},
		{"preempt", 1, blocktable.ErrInvalidArgument, func() error { _, err := m.PreemptSeq(1, blocktable.PreemptMode(99)); return err }()},
		{"admit", 1, blocktable.ErrDuplicateSeq, func() error {
			_, err := m.Admit(1, &hybrid.Request{Prompt: seqTokens(8, 0), MaxTokens: 8})
			return err
		}()},
		{"finish", 7, blocktable.ErrUnknownSeq, m.Finish(7)},
	} {
		require.ErrorIs(t, c.got, c.err, c.op)
		var se *blocktable.SeqError
		require.ErrorAs(t, c.got, &se, c.op)
		require.Equal(t, c.op, se.Op)
		require.Equal(t, c.seq, se.Seq, c.op)
	}
	require.NoError(t, m.CheckInvariants())
}
