package blocks

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name      string
		numBlocks int
		opts      []Option
		wantErr   bool
		capacity  int
		firstIDs  []ID
	}{
		{name: "one block", numBlocks: 1, capacity: 1, firstIDs: []ID{0}},
		{name: "plain pool starts at 0", numBlocks: 5, capacity: 5, firstIDs: []ID{0, 1, 2, 3, 4}},
		{name: "null block reserves 0", numBlocks: 5, opts: []Option{WithNullBlock()}, capacity: 4, firstIDs: []ID{1, 2, 3, 4}},
		{name: "null block and one usable", numBlocks: 2, opts: []Option{WithNullBlock()}, capacity: 1, firstIDs: []ID{1}},
		{name: "zero capacity", numBlocks: 0, wantErr: true},
		{name: "negative capacity", numBlocks: -3, wantErr: true},
		{name: "null-only pool", numBlocks: 1, opts: []Option{WithNullBlock()}, wantErr: true},
		{name: "empty pool with null block", numBlocks: 0, opts: []Option{WithNullBlock()}, wantErr: true},
		{name: "more blocks than int32 IDs", numBlocks: 1 << 31, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.numBlocks, tt.opts...)
			if tt.wantErr {
				require.Error(t, err)
				assert.ErrorIs(t, err, ErrInvalidArgument)
				assert.Nil(t, p)
				return
			}
			require.NoError(t, err)
			require.NoError(t, p.CheckInvariants())
			assert.Equal(t, tt.numBlocks, p.NumBlocks())
			assert.Equal(t, tt.capacity, p.Capacity())
			assert.Equal(t, tt.capacity, p.NumFree())
			assert.Equal(t, tt.capacity, p.Available())
			assert.Equal(t, len(tt.opts) > 0, p.HasNullBlock())
			assert.Equal(t, Stats{Capacity: tt.capacity, Free: tt.capacity}, p.Stats())
			assert.Equal(t, tt.firstIDs, mustAllocate(t, p, tt.capacity), "a new pool hands out ascending IDs")
		})
	}
}

func TestAllocate(t *testing.T) {
	tests := []struct {
		name    string
		pool    func(t *testing.T) *Pool
		dst     []ID
		n       int
		want    []ID
		wantErr error // sentinel; nil for success
		// For ErrOutOfBlocks, the figures the error must carry.
		requested, available int
	}{
		{
			name: "ascending from a new pool",
			pool: func(t *testing.T) *Pool { return newPool(t, 8) },
			n:    3, want: []ID{0, 1, 2},
		},
		{
			name: "appends to dst",
			pool: func(t *testing.T) *Pool { return newPool(t, 8) },
			dst:  []ID{42}, n: 2, want: []ID{42, 0, 1},
		},
		{
			name: "every block",
			pool: func(t *testing.T) *Pool { return newPool(t, 4, WithNullBlock()) },
			n:    3, want: []ID{1, 2, 3},
		},
		{
			name: "reuse in release order, after the never-used blocks",
			pool: func(t *testing.T) *Pool {
				p := newPool(t, 6)
				mustAllocate(t, p, 4) // 0 1 2 3; free: 4 5
				require.NoError(t, p.Release(2, 0))
				require.NoError(t, p.Release(3))
				return p
			},
			n: 5, want: []ID{4, 5, 2, 0, 3},
		},
		{
			name: "allocation wraps around the ring's end",
			pool: func(t *testing.T) *Pool {
				p := newPool(t, 4)
				mustAllocate(t, p, 3) // 0 1 2; the ring's head is now its last slot
				require.NoError(t, p.Release(2, 0, 1))
				return p
			},
			n: 4, want: []ID{3, 2, 0, 1},
		},
		{
			name: "release wraps around the ring's end",
			pool: func(t *testing.T) *Pool {
				p := newPool(t, 4)
				mustAllocate(t, p, 3)
				require.NoError(t, p.Release(2, 0, 1))
				require.Equal(t, []ID{3, 2, 0, 1}, mustAllocate(t, p, 4))
				require.NoError(t, p.Release(1, 3)) // 1 into the last slot, 3 into the first
				return p
			},
			n: 2, want: []ID{1, 3},
		},
		{
			name: "a block held twice comes back only when both holders leave",
			pool: func(t *testing.T) *Pool {
				p := newPool(t, 3)
				mustAllocate(t, p, 3)
				require.NoError(t, p.Retain(1))
				require.NoError(t, p.Release(1, 0, 2)) // 1 still held once
				require.NoError(t, p.Release(1))
				return p
			},
			n: 3, want: []ID{0, 2, 1},
		},
		{
			name: "zero blocks",
			pool: func(t *testing.T) *Pool { return newPool(t, 2) },
			dst:  []ID{7}, n: 0, want: []ID{7},
		},
		{
			name: "zero blocks from a full pool",
			pool: func(t *testing.T) *Pool { p := newPool(t, 2); mustAllocate(t, p, 2); return p },
			n:    0, want: nil,
		},
		{
			name: "negative count",
			pool: func(t *testing.T) *Pool { return newPool(t, 2) },
			dst:  []ID{7}, n: -1, want: []ID{7}, wantErr: ErrInvalidArgument,
		},
		{
			name: "all or nothing: one more than free",
			pool: func(t *testing.T) *Pool { p := newPool(t, 4); mustAllocate(t, p, 3); return p },
			dst:  []ID{9}, n: 2, want: []ID{9}, wantErr: ErrOutOfBlocks, requested: 2, available: 1,
		},
		{
			name: "all or nothing: empty pool",
			pool: func(t *testing.T) *Pool { p := newPool(t, 3, WithNullBlock()); mustAllocate(t, p, 2); return p },
			n:    1, wantErr: ErrOutOfBlocks, requested: 1, available: 0,
		},
		{
			name: "all or nothing: more than capacity",
			pool: func(t *testing.T) *Pool { return newPool(t, 4) },
			n:    5, wantErr: ErrOutOfBlocks, requested: 5, available: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.pool(t)
			before := takeSnapshot(p)
			got, err := p.Allocate(tt.dst, tt.n)
			assert.Equal(t, tt.want, got)
			if tt.wantErr == nil {
				require.NoError(t, err)
				require.NoError(t, p.CheckInvariants())
				for _, id := range got[len(tt.dst):] {
					assert.Equal(t, 1, p.RefCount(id), "block %d has one holder", id)
				}
				s := p.Stats()
				assert.Equal(t, before.Stats.Allocations+uint64(tt.n), s.Allocations)
				assert.Equal(t, before.Stats.Free-tt.n, s.Free)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			var failed uint64
			if tt.wantErr == ErrOutOfBlocks {
				failed = 1
				var oob *OutOfBlocksError
				require.ErrorAs(t, err, &oob)
				assert.Equal(t, tt.requested, oob.Requested)
				assert.Equal(t, tt.available, oob.Available)
			} else {
				var ce *CountError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tt.n, ce.N)
			}
			requireUnchanged(t, before, p, failed)
		})
	}
}

// Errors name the operation and the block, and read well.
func TestErrorMessages(t *testing.T) {
	p := newPool(t, 3, WithNullBlock())
	_, err := p.Allocate(nil, 5)
	assert.EqualError(t, err, "blocks: out of blocks: requested 5, available 2 (free + reclaimable)")
	_, err = p.Allocate(nil, -2)
	assert.EqualError(t, err, "blocks: allocate -2 blocks: invalid argument")
	assert.EqualError(t, p.Release(1), "blocks: release block 1: double free")
	assert.EqualError(t, p.Retain(0), "blocks: retain block 0: the null block is reserved")
}

func TestRetainRelease(t *testing.T) {
	type op int
	const (
		retain op = iota
		release
	)
	// Every case starts from a pool of 6 blocks with the null block, holding
	// 1 (refcount 1), 2 (refcount 2) and 3 (refcount 1), with 4 and 5 free.
	setup := func(t *testing.T) *Pool {
		p := newPool(t, 6, WithNullBlock())
		require.Equal(t, []ID{1, 2, 3}, mustAllocate(t, p, 3))
		require.NoError(t, p.Retain(2))
		return p
	}
	tests := []struct {
		name string
		op   op
		ids  []ID
		// On success: refcounts afterwards (of 1..5) and the free list in order.
		wantRefs []int
		wantFree []ID
		// On failure: the sentinel and the offending block.
		wantErr error
		badID   ID
	}{
		{name: "retain held blocks", op: retain, ids: []ID{1, 3}, wantRefs: []int{2, 2, 2, 0, 0}, wantFree: []ID{4, 5}},
		{name: "retain the same block twice in one call", op: retain, ids: []ID{1, 1}, wantRefs: []int{3, 2, 1, 0, 0}, wantFree: []ID{4, 5}},
		{name: "retain nothing", op: retain, wantRefs: []int{1, 2, 1, 0, 0}, wantFree: []ID{4, 5}},
		{name: "retain a free block", op: retain, ids: []ID{1, 4}, wantErr: ErrNotAllocated, badID: 4},
		{name: "retain the null block", op: retain, ids: []ID{1, NullID}, wantErr: ErrNullBlock, badID: NullID},
		{name: "retain an unknown block", op: retain, ids: []ID{1, 6}, wantErr: ErrUnknownBlock, badID: 6},
		{name: "retain a negative ID", op: retain, ids: []ID{-1}, wantErr: ErrUnknownBlock, badID: -1},

		{name: "release to zero queues in release order", op: release, ids: []ID{3, 1}, wantRefs: []int{0, 2, 0, 0, 0}, wantFree: []ID{4, 5, 3, 1}},
		{name: "release a shared block keeps it", op: release, ids: []ID{2}, wantRefs: []int{1, 1, 1, 0, 0}, wantFree: []ID{4, 5}},
		{name: "release both holders of a block in one call", op: release, ids: []ID{2, 1, 2}, wantRefs: []int{0, 0, 1, 0, 0}, wantFree: []ID{4, 5, 1, 2}},
		{name: "release nothing", op: release, wantRefs: []int{1, 2, 1, 0, 0}, wantFree: []ID{4, 5}},
		{name: "double free of a free block", op: release, ids: []ID{4}, wantErr: ErrDoubleFree, badID: 4},
		{name: "duplicate beyond the holders in one call", op: release, ids: []ID{1, 1}, wantErr: ErrDoubleFree, badID: 1},
		{name: "rollback after freeing blocks earlier in the call", op: release, ids: []ID{3, 2, 1, 2, 2}, wantErr: ErrDoubleFree, badID: 2},
		{name: "rollback on an unknown block", op: release, ids: []ID{3, 1, 99}, wantErr: ErrUnknownBlock, badID: 99},
		{name: "release a negative ID", op: release, ids: []ID{1, -5}, wantErr: ErrUnknownBlock, badID: -5},
		{name: "release the null block", op: release, ids: []ID{3, NullID}, wantErr: ErrNullBlock, badID: NullID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := setup(t)
			before := takeSnapshot(p)
			var err error
			opName := "retain"
			if tt.op == retain {
				err = p.Retain(tt.ids...)
			} else {
				opName = "release"
				err = p.Release(tt.ids...)
			}
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				var be *BlockError
				require.ErrorAs(t, err, &be)
				assert.Equal(t, BlockError{Op: opName, ID: tt.badID, Err: tt.wantErr}, *be)
				requireUnchanged(t, before, p, 0)
				return
			}
			require.NoError(t, err)
			require.NoError(t, p.CheckInvariants())
			refs := make([]int, 5)
			for i := range refs {
				refs[i] = p.RefCount(ID(i + 1))
			}
			assert.Equal(t, tt.wantRefs, refs)
			assert.Equal(t, tt.wantFree, freeOrder(p))
			assert.Equal(t, 0, p.RefCount(NullID))
			s := p.Stats()
			assert.Equal(t, before.Stats.Releases+uint64(len(tt.wantFree)-2), s.Releases)
		})
	}
}

// Without WithNullBlock, block 0 is an ordinary block.
func TestBlockZeroWithoutNullBlock(t *testing.T) {
	p := newPool(t, 2)
	require.Equal(t, []ID{0, 1}, mustAllocate(t, p, 2))
	require.NoError(t, p.Retain(0))
	assert.Equal(t, 2, p.RefCount(0))
	require.NoError(t, p.Release(0, 0))
	assert.Equal(t, []ID{0}, freeOrder(p))
}

func TestRefCountOfAnyID(t *testing.T) {
	p := newPool(t, 3, WithNullBlock())
	mustAllocate(t, p, 1)
	for id, want := range map[ID]int{-1: 0, NullID: 0, 1: 1, 2: 0, 3: 0, 1 << 30: 0} {
		assert.Equal(t, want, p.RefCount(id), "RefCount(%d)", id)
	}
}

// errors.Is must tell the sentinels apart: no error wraps two of them.
func TestSentinelsAreDistinct(t *testing.T) {
	sentinels := []error{ErrOutOfBlocks, ErrDoubleFree, ErrNotAllocated, ErrUnknownBlock, ErrNullBlock, ErrInvalidArgument}
	for i, a := range sentinels {
		for j, b := range sentinels {
			assert.Equal(t, i == j, errors.Is(a, b), "%v vs %v", a, b)
		}
	}
}
