package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/stretchr/testify/require"
)

func newPool(t testing.TB, n int) *blocks.Pool {
	t.Helper()
	p, err := blocks.New(n, blocks.WithNullBlock())
	require.NoError(t, err)
	return p
}

// requireNoLeak fails unless every usable block is back on the free list.
func requireNoLeak(t testing.TB, p *blocks.Pool) {
	t.Helper()
	require.NoError(t, p.CheckInvariants())
	require.Equal(t, p.Capacity(), p.NumFree(), "blocks leaked")
}

func TestTableAppendAllocatesOnlyWhenFull(t *testing.T) {
	p := newPool(t, 9) // blocks 1..8
	tb, err := NewTable(p, 4)
	require.NoError(t, err)
	tests := []struct {
		n, wantNew, wantBlocks, wantLen int
	}{
		{1, 1, 1, 1},
		{3, 0, 1, 4},
		{1, 1, 2, 5},
		{0, 0, 2, 5},
		{7, 1, 3, 12},
		{1, 1, 4, 13},
	}
	for _, tc := range tests {
		res, err := tb.Append(tc.n, 0)
		require.NoError(t, err)
		require.Equal(t, tc.wantNew, res.NewBlocks, "append %d", tc.n)
		require.Equal(t, tc.wantBlocks, tb.NumBlocks())
		require.Equal(t, tc.wantLen, tb.Len())
		require.NoError(t, tb.CheckInvariants())
	}
	require.Equal(t, []blocks.ID{1, 2, 3, 4}, tb.Blocks())
	require.NoError(t, tb.Release())
	requireNoLeak(t, p)
}

func TestTableSlotsAndRow(t *testing.T) {
	p := newPool(t, 9)
	filler, _ := NewTable(p, 4)
	_, err := filler.Append(4, 0) // takes block 1, so the table gets 2 and 3
	require.NoError(t, err)
	tb, _ := NewTable(p, 4)
	_, err = tb.Append(6, 0)
	require.NoError(t, err)
	require.Equal(t, []blocks.ID{2, 3}, tb.Blocks())

	for pos, want := range []int64{8, 9, 10, 11, 12, 13} {
		got, err := tb.Slot(pos)
		require.NoError(t, err)
		require.Equal(t, want, got, "pos %d", pos)
	}
	_, err = tb.Slot(6)
	require.ErrorIs(t, err, ErrInvalidArgument, "the empty tail of the last block is not reserved")
	_, err = tb.Slot(8)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = tb.Slot(-1)
	require.ErrorIs(t, err, ErrInvalidArgument)

	slots := []int64{7, 7, 7, 7, 7}
	n, err := tb.FillSlots(4, 0, slots)
	require.NoError(t, err)
	require.Equal(t, 2, n) // positions 4 and 5 hold tokens; 6 and 7 are the empty tail, padding
	require.Equal(t, []int64{12, 13, -1, -1, -1}, slots)

	row := []int32{9, 9, 9, 9}
	n, err = tb.FillRow(row)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []int32{2, 3, 0, 0}, row)
	short := []int32{9}
	_, err = tb.FillRow(short)
	require.ErrorIs(t, err, ErrShortBuffer)
	require.Equal(t, []int32{9}, short, "a failed fill writes nothing")

	require.NoError(t, tb.Release())
	require.NoError(t, filler.Release())
	requireNoLeak(t, p)
}

func TestTableOutOfBlocksChangesNothing(t *testing.T) {
	p := newPool(t, 4) // 3 usable
	other, _ := NewTable(p, 4)
	_, err := other.Append(1, 0) // holds one
	require.NoError(t, err)
	tb, _ := NewTable(p, 4)
	_, err = tb.Append(5, 0)
	require.NoError(t, err)
	_, err = tb.Append(4, 0) // would need a third block
	var oob *blocks.OutOfBlocksError
	require.ErrorAs(t, err, &oob)
	require.ErrorIs(t, err, blocks.ErrOutOfBlocks)
	require.ErrorIs(t, err, blocks.ErrOutOfBlocks)
	require.Equal(t, 1, oob.Missing())
	require.Equal(t, 5, tb.Len())
	require.Equal(t, 2, tb.NumBlocks())
	_, err = tb.Append(-1, 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = tb.Append(8, 0) // more than the pool's 12 slots, ever
	require.ErrorIs(t, err, ErrTooLarge)
	require.NoError(t, tb.Release())
	require.NoError(t, other.Release())
	requireNoLeak(t, p)
}

func TestTableForkCopyOnWrite(t *testing.T) {
	p := newPool(t, 9)
	parent, _ := NewTable(p, 4)
	_, err := parent.Append(6, 0) // blocks 1 (full) and 2 (2 of 4 slots)
	require.NoError(t, err)
	child, err := parent.Fork()
	require.NoError(t, err)
	require.Equal(t, parent.Blocks(), child.Blocks())
	require.Equal(t, 2, p.RefCount(1))
	require.Equal(t, 2, p.RefCount(2))
	require.Equal(t, 1, child.Need(1, 0), "a write into the shared block needs its copy")

	// The child's first write meets the shared, partly filled block 2: it copies it.
	res, err := child.Append(1, 0)
	require.NoError(t, err)
	require.True(t, res.Copied)
	require.Equal(t, CopyOp{Src: 2, Dst: 3}, res.Copy)
	require.Equal(t, []blocks.ID{1, 3}, child.Blocks())
	require.Equal(t, 1, p.RefCount(2))
	require.Equal(t, uint64(1), child.CopyOnWrites())

	// The parent now owns block 2 alone: no copy.
	res, err = parent.Append(1, 0)
	require.NoError(t, err)
	require.False(t, res.Copied)
	// The full block 1 stays shared: writes never touch it.
	res, err = child.Append(5, 0)
	require.NoError(t, err)
	require.False(t, res.Copied)
	require.Equal(t, 2, p.RefCount(1))

	require.NoError(t, parent.Release())
	require.NoError(t, child.Release())
	requireNoLeak(t, p)
}

func TestTableForkDoesNotShareLookahead(t *testing.T) {
	p := newPool(t, 9)
	parent, _ := NewTable(p, 4)
	_, err := parent.Append(4, 5) // 4 tokens, 5 draft slots: 3 blocks
	require.NoError(t, err)
	require.Equal(t, 3, parent.NumBlocks())
	child, err := parent.Fork()
	require.NoError(t, err)
	require.Equal(t, []blocks.ID{1}, child.Blocks())
	res, err := child.Append(1, 0)
	require.NoError(t, err)
	require.False(t, res.Copied, "the next write lands in a new block")
	require.NoError(t, parent.Release())
	require.NoError(t, child.Release())
	requireNoLeak(t, p)
}

func TestTableLookaheadAndTruncate(t *testing.T) {
	p := newPool(t, 17)
	tb, _ := NewTable(p, 4)
	_, err := tb.Append(7, 0)
	require.NoError(t, err)
	// Speculative step: one token plus 4 draft slots, reserved, not committed.
	res, err := tb.Append(1, 4)
	require.NoError(t, err)
	require.Equal(t, 1, res.NewBlocks)
	require.Equal(t, 8, tb.Len())
	require.Equal(t, 4, tb.Reserved())
	s, err := tb.Slot(11)
	require.NoError(t, err, "draft slots are addressable")
	require.Equal(t, int64(3*4+3), s)
	// The verifier accepted 2 draft tokens: they land in the reserved slots.
	res, err = tb.Append(2, 0)
	require.NoError(t, err)
	require.Equal(t, 0, res.NewBlocks)
	// Then speculation overshoots: 6 tokens appended, 5 rejected.
	_, err = tb.Append(6, 0)
	require.NoError(t, err)
	require.Equal(t, 16, tb.Len())
	require.Equal(t, 4, tb.NumBlocks())
	require.NoError(t, tb.Truncate(11))
	require.Equal(t, 11, tb.Len())
	require.Equal(t, 3, tb.NumBlocks())
	require.Equal(t, p.Capacity()-3, p.NumFree())
	require.ErrorIs(t, tb.Truncate(12), ErrInvalidArgument)
	require.ErrorIs(t, tb.Truncate(-1), ErrInvalidArgument)
	require.NoError(t, tb.Truncate(0))
	require.Equal(t, 0, tb.NumBlocks())
	requireNoLeak(t, p)
}

func TestTableTruncateIntoSharedBlockCopies(t *testing.T) {
	p := newPool(t, 9)
	parent, _ := NewTable(p, 4)
	_, err := parent.Append(8, 0)
	require.NoError(t, err)
	child, _ := parent.Fork()
	require.NoError(t, child.Truncate(6)) // block 2 is full and shared; now partly used
	res, err := child.Append(1, 0)
	require.NoError(t, err)
	require.True(t, res.Copied, "writing into the shared full block must copy it")
	require.Equal(t, blocks.ID(2), res.Copy.Src)
	require.NoError(t, parent.Release())
	require.NoError(t, child.Release())
	requireNoLeak(t, p)
}

func TestTableSlidingWindowReleasesBlocks(t *testing.T) {
	p := newPool(t, 9) // 8 usable blocks hold 32 tokens: the window keeps memory bounded
	tb, err := NewTable(p, 4, WithWindow(6))
	require.NoError(t, err)
	for i := range 200 {
		_, err := tb.Append(1, 0)
		require.NoError(t, err, "token %d", i)
		live := tb.NumBlocks() - tb.nulls
		require.LessOrEqual(t, live, 3, "window 6 + block 4 needs at most 3 live blocks")
	}
	require.Equal(t, 200, tb.Len())
	require.Equal(t, 50, tb.NumBlocks(), "the table never wraps: one entry per block of tokens")
	// Before the last append, Len was 199: positions >= 199-6+1 = 194 are in the window,
	// so blocks 0..47 (positions < 192) are released and point at the null block.
	for i, id := range tb.Blocks()[:48] {
		require.Equal(t, blocks.NullID, id, "entry %d", i)
	}
	require.NotEqual(t, blocks.NullID, tb.Blocks()[48])
	_, err = tb.Slot(100)
	require.ErrorIs(t, err, ErrInvalidArgument)
	row := make([]int32, 50)
	_, err = tb.FillRow(row)
	require.NoError(t, err)
	require.Equal(t, int32(0), row[0])
	require.ErrorIs(t, tb.Truncate(190), ErrInvalidArgument, "positions the window released")
	require.NoError(t, tb.Release())
	requireNoLeak(t, p)
}

func TestTableSlidingWindowReleasesBeforeAllocating(t *testing.T) {
	p := newPool(t, 3) // 2 usable blocks
	tb, _ := NewTable(p, 4, WithWindow(4))
	_, err := tb.Append(8, 0) // both blocks
	require.NoError(t, err)
	// Appending one more needs a third block, which only releasing block 0 can give.
	res, err := tb.Append(1, 0)
	require.NoError(t, err)
	require.Equal(t, 1, res.NewBlocks)
	require.Equal(t, blocks.NullID, tb.Blocks()[0])
	require.NoError(t, tb.Release())
	requireNoLeak(t, p)
}

func TestNewTableRejectsBadConfig(t *testing.T) {
	p := newPool(t, 3)
	_, err := NewTable(nil, 4)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = NewTable(p, 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
	noNull, err := blocks.New(3)
	require.NoError(t, err)
	_, err = NewTable(noNull, 4, WithWindow(8))
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestPackTables(t *testing.T) {
	p := newPool(t, 17)
	a, _ := NewTable(p, 4)
	b, _ := NewTable(p, 4)
	_, _ = a.Append(9, 0) // 1 2 3
	_, _ = b.Append(2, 0) // 4
	_, _ = a.Append(0, 0)
	var batch Batch
	require.NoError(t, PackTables(&batch, []*Table{a, b}))
	require.Equal(t, 2, batch.Len())
	require.Equal(t, 3, batch.Stride())
	require.Equal(t, []int32{1, 2, 3, 4, 0, 0}, batch.Rows())
	require.Equal(t, []int32{4, 0, 0}, batch.Row(1))

	batch.MaxBlocks = 4
	require.NoError(t, PackTables(&batch, []*Table{b, a}))
	require.Equal(t, []int32{4, 0, 0, 0, 1, 2, 3, 0}, batch.Rows())
	batch.MaxBlocks = 2
	err := PackTables(&batch, []*Table{a})
	require.ErrorIs(t, err, ErrShortBuffer)
	require.Equal(t, []int32{4, 0, 0, 0, 1, 2, 3, 0}, batch.Rows(), "unchanged on error")

	if !invariant.Enabled {
		batch.MaxBlocks = 0
		tables := []*Table{a, b}
		allocs := testing.AllocsPerRun(100, func() { _ = PackTables(&batch, tables) })
		require.Zero(t, allocs, "packing reuses the batch's memory")
	}
	require.NoError(t, a.Release())
	require.NoError(t, b.Release())
	requireNoLeak(t, p)
}

func TestTableAppendDoesNotAllocate(t *testing.T) {
	if invariant.Enabled {
		t.Skip("invariant checks allocate")
	}
	p := newPool(t, 1025)
	tb, _ := NewTable(p, 16)
	slots := make([]int64, 8)
	allocs := testing.AllocsPerRun(1000, func() {
		if tb.Len() >= 16*1000 {
			_ = tb.Truncate(0)
		}
		_, err := tb.Append(1, 0)
		if err != nil {
			panic(err)
		}
		_, _ = tb.FillSlots(tb.Len()-1, 0, slots)
	})
	require.Zero(t, allocs)
	require.NoError(t, tb.Release())
	requireNoLeak(t, p)
}
