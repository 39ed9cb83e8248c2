package hybrid_test

import (
	"slices"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// swapManager is the part of both Managers' API a scheduler drives around a Swap, so that
// one table test holds both to the same answers.
type swapManager struct {
	admit    func(id blocktable.SeqID, prompt []int32) error
	appendTo func(id blocktable.SeqID) error
	swap     func(id blocktable.SeqID) error
	resume   func(id blocktable.SeqID) error
	finish   func(id blocktable.SeqID) error
	table    func(id blocktable.SeqID) error
	fork     func(id blocktable.SeqID) error
	preempt  func(id blocktable.SeqID) error
	swapped  func(id blocktable.SeqID) bool
	holds    func() int // holds the lower tiers keep
	check    func() error
	query    func(id blocktable.SeqID) seqQuery // what Seq, Tokens and Contains say of id
	seqs     func() []blocktable.SeqID
}

func plainSwapManager(t *testing.T) swapManager {
	pool, err := blocks.New(30, blocks.WithNullBlock())
	require.NoError(t, err)
	idx, err := prefix.New(pool, 4, prefix.WithTiers(prefix.TierConfig{
		Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 16}}, BlockBytes: 64}))
	require.NoError(t, err)
	m, err := blocktable.New(blocktable.Config{Pool: pool, Index: idx, BlockSize: 4})
	require.NoError(t, err)
	return swapManager{
		admit: func(id blocktable.SeqID, p []int32) error {
			_, err := m.Admit(id, &blocktable.Request{Prompt: p, MaxTokens: len(p) + 8})
			return err
		},
		appendTo: func(id blocktable.SeqID) error { _, err := m.Append(id, []int32{7}, 0); return err },
		swap:     func(id blocktable.SeqID) error { _, err := m.PreemptSeq(id, blocktable.Swap); return err },
		resume:   func(id blocktable.SeqID) error { _, err := m.Resume(id); return err },
		finish:   m.Finish,
		table:    func(id blocktable.SeqID) error { _, err := m.Blocks(id); return err },
		fork:     func(id blocktable.SeqID) error { return m.Fork(id, 50) },
		preempt:  func(id blocktable.SeqID) error { _, err := m.PreemptSeq(id, blocktable.Recompute); return err },
		swapped: func(id blocktable.SeqID) bool {
			info, err := m.Seq(id)
			return err == nil && info.State == blocktable.Swapped
		},
		holds: func() int { return m.Stats().HostInUse },
		check: m.CheckInvariants,
		query: func(id blocktable.SeqID) seqQuery {
			info, err := m.Seq(id)
			toks, terr := m.Tokens(id)
			return seqQuery{err: err, state: info.State, tokens: info.Tokens, hit: info.HitTokens, priority: info.Priority,
				tokensErr: terr, toks: slices.Clone(toks), contains: m.Contains(id)}
		},
		seqs: func() []blocktable.SeqID { return m.Seqs(nil) },
	}
}

func hybridSwapManager(t *testing.T) swapManager {
	m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
		hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 4},
	}, NumBlocks: 30, Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 16}}, BlockBytes: 64}})
	require.NoError(t, err)
	return swapManager{
		admit: func(id blocktable.SeqID, p []int32) error {
			_, err := m.Admit(id, &hybrid.Request{Prompt: p, MaxTokens: len(p) + 8})
			return err
		},
		appendTo: func(id blocktable.SeqID) error { return m.Append(id, []int32{7}) },
		swap:     func(id blocktable.SeqID) error { _, err := m.PreemptSeq(id, blocktable.Swap); return err },
		resume:   func(id blocktable.SeqID) error { _, err := m.Resume(id); return err },
		finish:   m.Finish,
		table:    func(id blocktable.SeqID) error { _, err := m.Table(id, 0); return err },
		fork:     func(id blocktable.SeqID) error { return m.Fork(id, 50) },
		preempt:  func(id blocktable.SeqID) error { _, err := m.PreemptSeq(id, blocktable.Recompute); return err },
		swapped:  m.Swapped,
		holds:    m.Holds,
		check:    m.CheckInvariants,
		query: func(id blocktable.SeqID) seqQuery {
			info, err := m.Seq(id)
			toks, terr := m.Tokens(id)
			return seqQuery{err: err, state: info.State, tokens: info.Tokens, hit: info.HitTokens, priority: info.Priority,
				tokensErr: terr, toks: slices.Clone(toks), contains: m.Contains(id)}
		},
		seqs: func() []blocktable.SeqID { return m.Seqs(nil) },
	}
}

// Finish of a swapped-out sequence releases its hold on the lower tiers and forgets it,
// in both Managers alike: every later call on the ID, Resume included, fails with
// blocktable.ErrUnknownSeq (before, the hybrid Manager's Resume said ErrNotRunning), and
// an Admit may reuse it. While it is swapped out, a call that needs it running fails with
// blocktable.ErrNotRunning in both (the hybrid Manager said ErrUnknownSeq), and Resume of
// a running sequence with ErrNotRunning.
func TestFinishSwappedSequence(t *testing.T) {
	for name, build := range map[string]func(*testing.T) swapManager{"plain": plainSwapManager, "hybrid": hybridSwapManager} {
		t.Run(name, func(t *testing.T) {
			m := build(t)
			require.NoError(t, m.admit(1, seqTokens(9, 0)))
			require.NoError(t, m.admit(2, seqTokens(9, 100)))
			require.NoError(t, m.swap(1))
			require.True(t, m.swapped(1))
			require.Positive(t, m.holds(), "the swap holds seq 1's blocks in the host tier")

			for _, call := range []struct {
				name string
				err  error
			}{
				{"append", m.appendTo(1)}, {"table", m.table(1)}, {"fork", m.fork(1)}, {"preempt", m.preempt(1)},
				{"swap", m.swap(1)}, {"resume running", m.resume(2)},
			} {
				require.ErrorIs(t, call.err, blocktable.ErrNotRunning, "%s while swapped out", call.name)
				var se *blocktable.SeqError
				require.ErrorAs(t, call.err, &se, call.name)
			}
			require.ErrorIs(t, m.resume(99), blocktable.ErrUnknownSeq, "resume of an ID never admitted")

			require.NoError(t, m.finish(1))
			require.False(t, m.swapped(1))
			require.Zero(t, m.holds(), "Finish released the swapped sequence's hold")
			require.NoError(t, m.check())
			for _, call := range []struct {
				name string
				err  error
			}{
				{"resume", m.resume(1)}, {"finish", m.finish(1)}, {"append", m.appendTo(1)},
				{"table", m.table(1)}, {"fork", m.fork(1)}, {"preempt", m.preempt(1)}, {"swap", m.swap(1)},
			} {
				require.ErrorIs(t, call.err, blocktable.ErrUnknownSeq, "%s after Finish", call.name)
				require.NotErrorIs(t, call.err, blocktable.ErrNotRunning, call.name)
			}
			require.NoError(t, m.check())
			require.NoError(t, m.admit(1, seqTokens(9, 0)), "the ID is free again")
			require.NoError(t, m.check())
		})
	}
}
