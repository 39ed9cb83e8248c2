package hybrid_test

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/stretchr/testify/require"
)

// twoGroups is full attention plus a 4-token window, blocks of 4 tokens.
func twoGroups(t *testing.T, nb int) *hybrid.Manager {
	m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{
		hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 4},
	}, NumBlocks: nb})
	require.NoError(t, err)
	return m
}

func tables(t *testing.T, m *hybrid.Manager, id blocktable.SeqID) [][]blocks.ID {
	var out [][]blocks.ID
	for g := range m.Groups() {
		tb, err := m.Table(id, g)
		require.NoError(t, err)
		out = append(out, append([]blocks.ID(nil), tb...))
	}
	return out
}

// A fork shares every block in every group; the first write into the shared, partly
// filled last block copies it, group by group, and the copies are the step's CopyOps.
func TestForkCopyOnWrite(t *testing.T) {
	for _, c := range []struct {
		name      string
		prompt    int
		appendTo  blocktable.SeqID
		wantChild [][]blocks.ID
		copies    []hybrid.CopyOp
	}{
		{
			// 6 tokens: blocks 1 2 (full attention), 3 4 (window); 2 and 4 are partly filled.
			name: "partial last block", prompt: 6, appendTo: 2,
			wantChild: [][]blocks.ID{{1, 5}, {3, 6}},
			copies:    []hybrid.CopyOp{{Group: 0, Src: 2, Dst: 5}, {Group: 1, Src: 4, Dst: 6}},
		},
		{
			// The parent writes first: its copies are its own; the child keeps 2 and 4.
			name: "parent writes first", prompt: 6, appendTo: 1,
			wantChild: [][]blocks.ID{{1, 2}, {3, 4}},
			copies:    []hybrid.CopyOp{{Group: 0, Src: 2, Dst: 5}, {Group: 1, Src: 4, Dst: 6}},
		},
		{
			// 8 tokens: every block is full, so the next token takes a new block: no copy.
			// The window has released block 3 (tokens 0-3 are out of the window of token 8).
			name: "full blocks", prompt: 8, appendTo: 2,
			wantChild: [][]blocks.ID{{1, 2, 5}, {0, 4, 6}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := twoGroups(t, 20)
			_, err := m.Admit(1, &hybrid.Request{Prompt: seqTokens(c.prompt, 0), MaxTokens: 12})
			require.NoError(t, err)
			parent := tables(t, m, 1)
			require.NoError(t, m.Fork(1, 2))
			require.Equal(t, parent, tables(t, m, 2), "the fork shares every block")
			require.Empty(t, m.TakeCopies(nil))
			require.NoError(t, m.Append(c.appendTo, []int32{99}))
			require.Equal(t, c.copies, m.TakeCopies(nil))
			require.Empty(t, m.TakeCopies(nil), "taken once")
			require.Equal(t, c.wantChild, tables(t, m, 2))
			other := blocktable.SeqID(3) - c.appendTo
			require.NoError(t, m.Append(other, []int32{98}))
			require.Empty(t, m.TakeCopies(nil), "the other one now holds its blocks alone")
			require.Equal(t, uint64(len(c.copies)), m.Stats().CopyOnWrites)
			require.NoError(t, m.CheckInvariants())
			require.NoError(t, m.Finish(1))
			require.NoError(t, m.Finish(2))
			st := m.Stats()
			require.Equal(t, st.Capacity, st.Free, "nothing leaked")
		})
	}
}

// Fork refuses a missing parent or an existing child and changes nothing; a copy the pool
// cannot make fails the Append and changes nothing.
func TestForkErrors(t *testing.T) {
	m := twoGroups(t, 5) // 4 usable blocks
	_, err := m.Admit(1, &hybrid.Request{Prompt: seqTokens(6, 0), MaxTokens: 12})
	require.NoError(t, err)
	require.True(t, errors.Is(m.Fork(9, 2), blocktable.ErrUnknownSeq))
	require.True(t, errors.Is(m.Fork(1, 1), blocktable.ErrDuplicateSeq))
	require.NoError(t, m.Fork(1, 2))
	before := m.Stats()
	err = m.Append(2, []int32{1})
	require.True(t, errors.Is(err, blocks.ErrOutOfBlocks), "two copies, no free block: %v", err)
	require.Equal(t, before, m.Stats())
	require.Empty(t, m.TakeCopies(nil))
	require.NoError(t, m.CheckInvariants())
	require.NoError(t, m.Finish(1))
	require.NoError(t, m.Append(2, []int32{1}), "alone now: no copy needed")
	require.Empty(t, m.TakeCopies(nil))
	require.NoError(t, m.Finish(2))
}

// Reserve gives lookahead slots in private blocks (copying a shared one), FillSlots writes
// one group's slot mapping of [from, computed) plus the reserved slots, padded with -1, and
// refuses positions the window no longer holds.
func TestReserveFillSlots(t *testing.T) {
	m := twoGroups(t, 20)
	_, err := m.Admit(1, &hybrid.Request{Prompt: seqTokens(6, 0), MaxTokens: 16})
	require.NoError(t, err) // full attention 1 2, window 3 4
	require.NoError(t, m.Reserve(1, 3))
	require.Equal(t, [][]blocks.ID{{1, 2, 5}, {3, 4, 6}}, tables(t, m, 1), "slots 6..8 need a third block")
	dst := make([]int64, 8)
	n, err := m.FillSlots(1, 0, 4, 3, dst)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	require.Equal(t, []int64{2*4 + 0, 2*4 + 1, 2*4 + 2, 2*4 + 3, 5 * 4, -1, -1, -1}, dst)
	n, err = m.FillSlots(1, 1, 6, 0, dst)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, int64(-1), dst[0])
	_, err = m.FillSlots(1, 0, 0, 4, dst)
	require.True(t, errors.Is(err, blocktable.ErrInvalidArgument), "only 3 reserved")
	_, err = m.FillSlots(1, 0, 0, 3, dst[:5])
	require.True(t, errors.Is(err, blocktable.ErrShortBuffer))

	// Two tokens use the reservation: no block allocated, one reserved slot left.
	free := m.Stats().Free
	require.NoError(t, m.Append(1, []int32{6, 7}))
	require.Equal(t, free, m.Stats().Free)
	info, err := m.Seq(1)
	require.NoError(t, err)
	require.Equal(t, 1, info.Reserved)
	require.NoError(t, m.Append(1, []int32{8, 9}))
	// 10 tokens: the window (4 tokens) released block 3 (tokens 0-3) before allocating.
	_, err = m.FillSlots(1, 1, 0, 0, dst)
	require.True(t, errors.Is(err, blocktable.ErrInvalidArgument), "tokens 0-3 left the window")
	n, err = m.FillSlots(1, 1, 4, 0, dst)
	require.NoError(t, err)
	require.Equal(t, 6, n)

	// A fork shares the block the reservation begins in: it is cancelled, and Reserve
	// copies the block.
	require.NoError(t, m.Reserve(1, 1))
	require.NoError(t, m.Fork(1, 2))
	r, _ := m.Reserved(1)
	require.Zero(t, r)
	require.NoError(t, m.Reserve(2, 2))
	require.Len(t, m.TakeCopies(nil), 2, "one copy per group")
	r, _ = m.Reserved(2)
	require.Equal(t, 2, r)
	require.NoError(t, m.CheckInvariants())
	require.NoError(t, m.Finish(1))
	require.NoError(t, m.Finish(2))
	require.Equal(t, m.Stats().Capacity, m.Stats().Free)
}
