package blocktable

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
)

// Batch is a padded, row-major [Len x Stride] int32 buffer of block tables, the input of
// a paged-attention kernel for one step. Padding is the null block (0). Its memory is
// reused from step to step: packing allocates only when a batch outgrows every earlier one.
type Batch struct {
	// MaxBlocks, when positive, fixes the stride (for fixed kernel shapes, CUDA graphs);
	// a longer table fails with ErrShortBuffer. When 0 the stride is the longest row.
	MaxBlocks int

	rows   []int32
	stride int
	n      int
}

// Rows returns the packed buffer, Len() x Stride() entries, without a copy: the Batch's
// own memory, valid until the next pack into it (a kernel launch reads it in place).
// It is clipped to its length, so that an append to it copies rather than writing into
// the buffer's room.
func (b *Batch) Rows() []int32 {
	n := b.n * b.stride
	return b.rows[:n:n]
}

// Row returns row i of Rows, valid as long: clipped to the row, so that an append to it
// copies rather than overwriting row i+1.
func (b *Batch) Row(i int) []int32 {
	lo, hi := i*b.stride, (i+1)*b.stride
	return b.rows[lo:hi:hi]
}

// Stride is the length of every row.
func (b *Batch) Stride() int { return b.stride }

// Len is the number of rows.
func (b *Batch) Len() int { return b.n }

// reset sizes the buffer for n rows of stride entries, all zero.
func (b *Batch) reset(n, stride int) {
	size := n * stride
	if cap(b.rows) < size {
		b.rows = make([]int32, size)
	}
	b.rows = b.rows[:size]
	clear(b.rows)
	b.n, b.stride = n, stride
}

// MaxBatchEntries bounds a Batch's buffer, rows x stride block IDs (4 bytes each): 2^30
// entries is 4 GiB, beyond any real batch; a larger MaxBlocks x batch is refused with a
// *SizeError rather than allocated.
const MaxBatchEntries = 1 << 30

// strideFor returns the stride for rows rows whose longest table has longest blocks.
func (b *Batch) strideFor(longest, rows int) (int, error) {
	stride := longest
	if b.MaxBlocks > 0 {
		if longest > b.MaxBlocks {
			return 0, fmt.Errorf("%w: a table of %d blocks in a batch of stride %d", ErrShortBuffer, longest, b.MaxBlocks)
		}
		stride = b.MaxBlocks
	}
	if rows > 0 && stride > MaxBatchEntries/rows {
		return 0, &SizeError{Op: "pack", What: "batch entries (rows x stride)", N: stride, Max: MaxBatchEntries / rows}
	}
	return stride, nil
}

// PackTables packs tables into b, one row each, reusing b's memory. On error b is unchanged.
// Manager.Pack is the same for a Manager's sequences, named by SeqID.
func PackTables(b *Batch, tables []*Table) error {
	return b.pack(len(tables), func(i int) ([]blocks.ID, error) { return tables[i].ids, nil })
}

// pack is the one packing routine behind PackTables and Manager.Pack: it packs n rows
// into b, row i holding the block IDs that row(i) returns. A first pass asks each row
// for its IDs (an error there returns with b unchanged) and finds the longest; the second
// sizes b and copies. row is called twice per row and must return the same IDs both
// times; it does not escape, so the caller's closure stays on its stack and packing
// allocates nothing once b is large enough.
func (b *Batch) pack(n int, row func(i int) ([]blocks.ID, error)) error {
	longest := 0
	for i := range n {
		ids, err := row(i)
		if err != nil {
			return err
		}
		longest = max(longest, len(ids))
	}
	stride, err := b.strideFor(longest, n)
	if err != nil {
		return err
	}
	b.reset(n, stride)
	for i := range n {
		ids, _ := row(i)
		dst := b.rows[i*stride : (i+1)*stride]
		for j, id := range ids {
			dst[j] = int32(id)
		}
	}
	return nil
}
