package blocktable

import "fmt"

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

// Rows returns the packed buffer, Len() x Stride() entries.
func (b *Batch) Rows() []int32 { return b.rows[:b.n*b.stride] }

// Row returns row i.
func (b *Batch) Row(i int) []int32 { return b.rows[i*b.stride : (i+1)*b.stride] }

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
func PackTables(b *Batch, tables []*Table) error {
	longest := 0
	for _, t := range tables {
		longest = max(longest, len(t.ids))
	}
	stride, err := b.strideFor(longest, len(tables))
	if err != nil {
		return err
	}
	b.reset(len(tables), stride)
	for i, t := range tables {
		row := b.rows[i*stride : (i+1)*stride]
		for j, id := range t.ids {
			row[j] = int32(id)
		}
	}
	return nil
}
