package hybrid_test

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/stretchr/testify/require"
)

// Table's slice used to keep the table's room (sized for the whole sequence at
// admission): a caller's append wrote into the array the table grows into, and the
// Manager's next block overwrote what the caller had appended. Every view is clipped
// now, Groups' and Tokens' too, so that an append copies.
func TestHybridViewsAreClipped(t *testing.T) {
	m := swapAllocManager(t)
	_, err := m.Admit(1, &hybrid.Request{Prompt: seqTokens(6, 100), MaxTokens: 40})
	require.NoError(t, err)
	view, err := m.Table(1, 0)
	require.NoError(t, err)
	require.Equal(t, len(view), cap(view), "Table")
	toks, err := m.Tokens(1)
	require.NoError(t, err)
	require.Equal(t, len(toks), cap(toks), "Tokens")
	require.Equal(t, len(m.Groups()), cap(m.Groups()), "Groups")

	mine := append(view, 999)
	require.NoError(t, m.Append(1, seqTokens(4, 200))) // a new block in group 0
	require.Equal(t, blocks.ID(999), mine[len(view)], "the caller's appended copy")
	now, err := m.Table(1, 0)
	require.NoError(t, err)
	require.NotEqual(t, blocks.ID(999), now[len(view)])
	require.NoError(t, m.CheckInvariants())
}

// AppendTable appends a copy, allocates nothing when dst has room, and returns dst with
// Table's typed error when the sequence cannot answer.
func TestHybridAppendTableCopies(t *testing.T) {
	m := swapAllocManager(t)
	_, err := m.Admit(1, &hybrid.Request{Prompt: seqTokens(9, 100), MaxTokens: 40})
	require.NoError(t, err)
	view, err := m.Table(1, 0)
	require.NoError(t, err)
	dst := []blocks.ID{77}
	got, err := m.AppendTable(dst, 1, 0)
	require.NoError(t, err)
	require.Equal(t, append([]blocks.ID{77}, view...), got)
	got[1] = 999
	again, _ := m.Table(1, 0)
	require.Equal(t, view[0], again[0], "the copy is the caller's")

	for _, tc := range []struct {
		name string
		seq  blocktable.SeqID
		g    int
		want error
	}{
		{"unknown", 42, 0, blocktable.ErrUnknownSeq},
		{"group", 1, 2, blocktable.ErrInvalidArgument},
		{"negative group", 1, -1, blocktable.ErrInvalidArgument},
	} {
		got, err := m.AppendTable(dst, tc.seq, tc.g)
		require.ErrorIs(t, err, tc.want, tc.name)
		require.Equal(t, dst, got, tc.name)
	}
	_, err = m.PreemptSeq(1, blocktable.Swap)
	require.NoError(t, err)
	got, err = m.AppendTable(dst, 1, 0)
	require.ErrorIs(t, err, blocktable.ErrNotRunning, "swapped out")
	require.Equal(t, dst, got)
	completeAll(t, m, true)
	_, err = m.Resume(1)
	require.NoError(t, err)
	completeAll(t, m, true)

	if !invariant.Enabled {
		buf := make([]blocks.ID, 0, 16)
		require.Zero(t, testing.AllocsPerRun(100, func() { buf, _ = m.AppendTable(buf[:0], 1, 1) }))
	}
}
