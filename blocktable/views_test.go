package blocktable

import (
	"errors"
	"slices"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/stretchr/testify/require"
)

// Every slice a query hands out without a copy is clipped to its length, so that an
// append to it copies: Blocks' used to keep the table's room, so a caller's append wrote
// into the array the table grows into, and the Manager's next block overwrote what the
// caller had appended (a Batch row's room was the next row).
func TestViewsAreClipped(t *testing.T) {
	s := newStack(t, 32, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(6, 100), MaxTokens: 40}) // the table's room: 10 blocks
	require.NoError(t, err)
	_, err = s.m.Admit(2, &Request{Prompt: seqOf(9, 500), MaxTokens: 40})
	require.NoError(t, err)
	blocksOf := func() []blocks.ID { b, err := s.m.Blocks(1); require.NoError(t, err); return b }
	tokensOf := func() []int32 { b, err := s.m.Tokens(1); require.NoError(t, err); return b }
	var batch Batch
	require.NoError(t, s.m.Pack(&batch, []SeqID{1, 2}))
	table := &s.m.seqs[1].t

	// Each view, and what appending 999 to it and then growing the sequence must leave.
	views := []struct {
		name string
		view func() []int64
	}{
		{"Manager.Blocks", func() []int64 { return widen(blocksOf()) }},
		{"Table.Blocks", func() []int64 { return widen(table.Blocks()) }},
		{"Manager.Tokens", func() []int64 { return widen(tokensOf()) }},
		{"Batch.Rows", func() []int64 { return widen(batch.Rows()) }},
		{"Batch.Row", func() []int64 { return widen(batch.Row(0)) }},
	}
	for _, v := range views {
		require.Equal(t, len(v.view()), cap(v.view()), v.name)
	}
	b := blocksOf()
	mine := append(b, 999)
	toks := tokensOf()
	mineToks := append(toks, 999)
	row1 := slices.Clone(batch.Row(1))
	_ = append(batch.Row(0), 999)
	require.Equal(t, row1, batch.Row(1), "an append to row 0 leaves row 1")

	_, err = s.m.Append(1, seqOf(4, 200), 0) // a new block
	require.NoError(t, err)
	require.Equal(t, blocks.ID(999), mine[len(b)], "the caller's appended copy")
	require.Equal(t, int32(999), mineToks[len(toks)])
	require.NotEqual(t, blocks.ID(999), blocksOf()[len(b)])
	require.Equal(t, int32(200), tokensOf()[len(toks)])
	s.done(t)
}

// widen is a view's entries as int64, with its capacity, for one table of checks.
func widen[T ~int32](v []T) []int64 {
	out := make([]int64, len(v), cap(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// The copy forms append to dst, allocate nothing when dst has room, and return dst with
// the typed error when the sequence cannot answer.
func TestAppendBlocksCopies(t *testing.T) {
	s := newStack(t, 32, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(9, 100), MaxTokens: 40})
	require.NoError(t, err)
	view, err := s.m.Blocks(1)
	require.NoError(t, err)
	dst := []blocks.ID{77}
	got, err := s.m.AppendBlocks(dst, 1)
	require.NoError(t, err)
	require.Equal(t, append([]blocks.ID{77}, view...), got)
	got[1] = 999
	again, _ := s.m.Blocks(1)
	require.Equal(t, view[0], again[0], "the copy is the caller's")
	require.Equal(t, view, s.m.seqs[1].t.AppendBlocks(nil), "Table.AppendBlocks")

	got, err = s.m.AppendBlocks(dst, 42)
	require.ErrorIs(t, err, ErrUnknownSeq)
	require.Equal(t, dst, got)
	var se *SeqError
	require.True(t, errors.As(err, &se))
	require.Equal(t, SeqID(42), se.Seq)

	if !invariant.Enabled {
		buf := make([]blocks.ID, 0, 16)
		tbuf := make([]int32, 0, 16)
		table := &s.m.seqs[1].t
		require.Zero(t, testing.AllocsPerRun(100, func() {
			buf, _ = s.m.AppendBlocks(buf[:0], 1)
			buf = table.AppendBlocks(buf[:0])
			tbuf, _ = s.m.AppendTokens(tbuf[:0], 1)
		}))
		require.True(t, slices.Equal(view, buf))
	}
	s.done(t)
}
