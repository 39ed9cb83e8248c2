package prefix

import (
	"bytes"
	"math"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/testhook"
	"github.com/stretchr/testify/require"
)

// Issue 13 item 14: block size 1,000,000 over 8,192 blocks was a fatal 32.8 GB allocation;
// 2^62 panicked in makeslice over 3 blocks and succeeded with an empty arena over 4. New
// now refuses absurd block sizes and token arenas before allocating, with a typed error,
// and leaves the pool without a reclaimer.
func TestNewRefusesAbsurdSizes(t *testing.T) {
	for _, c := range []struct {
		blocks, bs int
	}{
		{8192, 1_000_000}, {3, 1 << 62}, {4, 1 << 62}, {4, math.MaxInt}, {2, MaxBlockSize + 1},
		{1 << 17, MaxBlockSize}, // 2^33 tokens: over the arena bound
		{8, -1}, {8, 0}, {8, math.MinInt},
	} {
		pool, err := blocks.New(c.blocks)
		require.NoError(t, err)
		_, err = New(pool, c.bs)
		require.ErrorIs(t, err, ErrInvalidArgument, "%d blocks of %d", c.blocks, c.bs)
		var se *SizeError
		require.ErrorAs(t, err, &se)
		require.NoError(t, pool.SetReclaimer(nil))
		require.Zero(t, pool.Stats().Reclaimable)
		x, err := New(pool, 4) // the refused index did not take the pool's reclaimer slot
		require.NoError(t, err)
		require.NoError(t, x.CheckInvariants())
	}
	pool, err := blocks.New(16)
	require.NoError(t, err)
	_, err = New(pool, MaxBlockSize)
	require.NoError(t, err, "the largest block size over a small pool")
}

// Issue 14 item 5: a second index over one pool silently replaced the first as the pool's
// reclaimer, stranding its cached blocks. It is refused.
func TestNewRefusesASecondIndexOverAPool(t *testing.T) {
	pool, err := blocks.New(8)
	require.NoError(t, err)
	x, err := New(pool, 4)
	require.NoError(t, err)
	_, err = New(pool, 4)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, err, blocks.ErrReclaimerSet)
	require.Same(t, pool, x.Pool())
	require.NotNil(t, x.Clock())
}

// Issue 13 item 13 through the index: Acquire of a block with MaxRefCount holders fails
// with ErrRefCountOverflow and changes nothing.
func TestAcquireRefusesRefCountOverflow(t *testing.T) {
	pool, err := blocks.New(8)
	require.NoError(t, err)
	x, err := New(pool, 2)
	require.NoError(t, err)
	ids, err := pool.Allocate(nil, 2)
	require.NoError(t, err)
	var cur Cursor
	_, err = x.Commit(&cur, &Prompt{Tokens: []int32{1, 2, 3, 4}}, ids)
	require.NoError(t, err)
	testhook.SetRefCount(pool, int32(ids[1]), blocks.MaxRefCount)
	dump := func() string {
		var b bytes.Buffer
		require.NoError(t, pool.WriteState(&b))
		require.NoError(t, x.WriteState(&b))
		return b.String()
	}
	before := dump()
	err = x.Acquire(ids)
	require.ErrorIs(t, err, blocks.ErrRefCountOverflow)
	require.Equal(t, before, dump())
	testhook.SetRefCount(pool, int32(ids[1]), 2)
	require.NoError(t, x.Release(ids))
	require.NoError(t, x.CheckInvariants())
}

// An eviction history sized by the caller is bounded too: MaxInt used to loop forever
// rounding up to a power of two, and 2^40 allocated 16 TiB.
func TestNewRefusesAbsurdHistory(t *testing.T) {
	for _, n := range []int{-1, MaxEvictionHistory + 1, 1 << 40, math.MaxInt} {
		pool, err := blocks.New(8)
		require.NoError(t, err)
		_, err = New(pool, 4, WithEvictionHistory(n))
		var se *SizeError
		require.ErrorAs(t, err, &se, "history %d", n)
		require.ErrorIs(t, err, ErrInvalidArgument)
	}
}
