package blocktable

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A step's pass fails after Admit committed the prompt: the dropped blocks stay in the
// sequence's table, later admissions hit only what came before them, and the sequence,
// decoding on, does not cache its blocks again. Without the stale mark its next filled
// block's commit finds its cursor's path gone, re-matches and commits its own blocks
// past the match: the dropped blocks, cached once more.
func TestManagerEvictBlocksKeepsTheSequenceFromCachingThemAgain(t *testing.T) {
	s := newStack(t, 32, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(14, 1)}) // 3 full blocks and 2 tokens
	require.NoError(t, err)
	table, err := s.m.Blocks(1)
	require.NoError(t, err)
	table = append([]blocks.ID(nil), table...)

	n, err := s.m.EvictBlocks(table[1:2])
	require.NoError(t, err)
	require.Equal(t, 2, n, "block 1 and block 2 below it")
	after, err := s.m.Blocks(1)
	require.NoError(t, err)
	require.Equal(t, table, after, "the sequence keeps its blocks")
	res, err := s.m.CanAdmit(2, &Request{Prompt: seqOf(14, 1)})
	require.NoError(t, err)
	require.Equal(t, 4, res.HitTokens, "only the block before the dropped one")

	_, err = s.m.Append(1, seqOf(2, 90), 0) // fills block 3
	require.NoError(t, err)
	res, err = s.m.CanAdmit(2, &Request{Prompt: append(seqOf(14, 1), seqOf(2, 90)...)})
	require.NoError(t, err)
	require.Equal(t, 4, res.HitTokens, "the dropped blocks are not cached again")
	require.Equal(t, 1, s.idx.Stats().Cached)
	require.NoError(t, s.m.CheckInvariants())

	// Failed by the server and admitted again, it computes and caches its prompt afresh.
	require.NoError(t, s.m.Abort(1))
	_, err = s.m.Admit(3, &Request{Prompt: seqOf(14, 1)})
	require.NoError(t, err)
	res, err = s.m.CanAdmit(4, &Request{Prompt: seqOf(14, 1)})
	require.NoError(t, err)
	require.Equal(t, 12, res.HitTokens)
	s.done(t)
}

// Only the sequences holding a dropped block stop committing; one that shares the blocks
// above it, and one elsewhere, go on.
func TestManagerEvictBlocksMarksOnlyTheHolders(t *testing.T) {
	s := newStack(t, 32, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(10, 1)}) // blocks A0 A1 and 2 tokens
	require.NoError(t, err)
	_, err = s.m.Admit(2, &Request{Prompt: append(seqOf(4, 1), seqOf(6, 50)...)}) // A0 B1
	require.NoError(t, err)
	_, err = s.m.Admit(3, &Request{Prompt: seqOf(6, 70)})
	require.NoError(t, err)
	t1, err := s.m.Blocks(1)
	require.NoError(t, err)

	n, err := s.m.EvictBlocks(t1[1:2])
	require.NoError(t, err)
	require.Equal(t, 1, n)
	cached := s.idx.Stats().Cached
	for _, id := range []SeqID{1, 2, 3} {
		_, err = s.m.Append(id, seqOf(2, 200), 0) // each fills a block
		require.NoError(t, err)
	}
	require.Equal(t, cached+2, s.idx.Stats().Cached, "seqs 2 and 3 commit, seq 1 does not")
	s.done(t)
}

func TestManagerEvictBlocksErrors(t *testing.T) {
	tests := []struct {
		name  string
		index bool
		ids   func(table []blocks.ID) []blocks.ID
		want  error
		n     int
	}{
		{name: "outside the pool", index: true, ids: func(tb []blocks.ID) []blocks.ID { return []blocks.ID{tb[0], 33} }, want: ErrInvalidArgument},
		{name: "negative", index: true, ids: func([]blocks.ID) []blocks.ID { return []blocks.ID{-1} }, want: ErrInvalidArgument},
		{name: "no index, outside the pool", ids: func([]blocks.ID) []blocks.ID { return []blocks.ID{33} }, want: ErrInvalidArgument},
		{name: "no index: nothing is cached", ids: func(tb []blocks.ID) []blocks.ID { return tb }},
		{name: "uncached blocks are ignored", index: true, ids: func(tb []blocks.ID) []blocks.ID { return []blocks.ID{blocks.NullID, tb[2], 31} }},
		{name: "none", index: true, ids: func([]blocks.ID) []blocks.ID { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s *stack
			if tt.index {
				s = newStack(t, 32, 4, Config{})
			} else {
				pool := newPool(t, 33)
				m, err := New(Config{Pool: pool, BlockSize: 4})
				require.NoError(t, err)
				s = &stack{m: m, pool: pool}
			}
			_, err := s.m.Admit(1, &Request{Prompt: seqOf(10, 1)}) // 2 full blocks, a partial one
			require.NoError(t, err)
			table, err := s.m.Blocks(1)
			require.NoError(t, err)
			var before string
			if tt.index {
				before = s.text(t)
			}
			n, err := s.m.EvictBlocks(tt.ids(table))
			if tt.want != nil {
				require.True(t, errors.Is(err, tt.want), "%v", err)
				var be *prefix.BlockError
				require.True(t, errors.As(err, &be))
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tt.n, n)
			if tt.index {
				require.Equal(t, before, s.text(t), "nothing changed")
			}
			require.NoError(t, s.m.CheckInvariants())
			require.NoError(t, s.m.Finish(1))
			require.NoError(t, s.m.CheckInvariants())
		})
	}
}
