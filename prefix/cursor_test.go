package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// a commits a block that b already cached: a's cursor stands on b's copy, which a does not
// hold. When b's copy is evicted under it, a's next commit finds the path again if someone
// re-cached it, and otherwise leaves a's blocks uncached (orphaned), never dangling.
func TestDuplicateCopyEvictedUnderCursor(t *testing.T) {
	for _, recache := range []bool{false, true} {
		pool, x := newTestIndex(t, 32)
		tk := toks(1, 2*testBS)
		a := &request{p: Prompt{Tokens: append([]int32(nil), tk[:testBS]...)}}
		a.ids, a.cur = x.Peek(nil, &a.p, LeaveOne)
		var err error
		a.ids, err = pool.Allocate(a.ids, 1)
		require.NoError(t, err)

		b := admit(t, x, pool, Prompt{Tokens: tk}) // b caches both blocks
		res, err := x.Commit(&a.cur, &Prompt{Tokens: tk}, a.ids[:1])
		require.NoError(t, err)
		assert.Equal(t, CommitResult{Duplicates: 1}, res)
		b.finish(t, x)
		assert.Equal(t, 2, x.Evict(2), "b's path goes, a's cursor node with it")
		if recache {
			admit(t, x, pool, Prompt{Tokens: tk}).finish(t, x)
		}

		a.p.Tokens = tk
		a.ids, err = pool.Allocate(a.ids, 1)
		require.NoError(t, err)
		res, err = x.Commit(&a.cur, &a.p, a.ids[1:2])
		require.NoError(t, err)
		if recache {
			assert.Equal(t, CommitResult{Duplicates: 1}, res, "the path was found again")
		} else {
			assert.Equal(t, CommitResult{Orphaned: 1}, res)
			assert.False(t, x.IsCached(a.ids[1]))
			// Detached for good: later blocks are orphaned too.
			a.p.Tokens = toks(1, 3*testBS)
			a.ids, err = pool.Allocate(a.ids, 1)
			require.NoError(t, err)
			res, err = x.Commit(&a.cur, &a.p, a.ids[2:3])
			require.NoError(t, err)
			assert.Equal(t, CommitResult{Orphaned: 1}, res)
		}
		assert.Equal(t, len(a.ids), a.cur.Blocks())
		require.NoError(t, x.Release(a.ids))
		require.NoError(t, x.CheckInvariants())
		x.Evict(100)
		assert.Equal(t, pool.Capacity(), pool.NumFree(), "nothing leaked")
	}
}

func TestCursorOfAnotherNamespaceIsRejected(t *testing.T) {
	pool, x := newTestIndex(t, 16)
	admit(t, x, pool, Prompt{Tokens: toks(50, testBS), Namespace: Namespace{LoRA: "a"}}).finish(t, x)
	_, c := x.Peek(nil, &Prompt{Tokens: toks(1, testBS), Namespace: Namespace{LoRA: "a"}}, WholePrompt) // at a's root
	ids, err := pool.Allocate(nil, 1)
	require.NoError(t, err)
	_, err = x.Commit(&c, &Prompt{Tokens: toks(1, testBS), Namespace: Namespace{LoRA: "b"}}, ids)
	assert.ErrorIs(t, err, ErrInvalidCursor)
	_, err = x.Commit(&c, &Prompt{Tokens: toks(1, testBS), Namespace: Namespace{LoRA: "a"}}, ids)
	assert.NoError(t, err)
}

func TestReleaseRepeatedBlock(t *testing.T) {
	pool, x := newTestIndex(t, 16)
	admit(t, x, pool, Prompt{Tokens: toks(1, testBS)}).finish(t, x)
	got, _ := x.Peek(nil, &Prompt{Tokens: toks(1, testBS)}, WholePrompt)
	require.Len(t, got, 1)
	require.NoError(t, x.Acquire(got))
	twice := []blocks.ID{got[0], got[0]}
	before := snap(x, pool)
	assert.ErrorIs(t, x.Release(twice), ErrNotAcquired, "acquired once, released twice")
	assert.Equal(t, before, snap(x, pool))
	require.NoError(t, x.Acquire(got))
	require.NoError(t, x.Release(twice), "acquired twice, released twice")
	assert.Equal(t, 1, pool.RefCount(got[0]))
	assert.Equal(t, 1, x.Stats().Evictable)
}

func TestPresentBlockCommittedAgain(t *testing.T) {
	pool, x := newTestIndex(t, 16)
	r := admit(t, x, pool, Prompt{Tokens: toks(1, 2*testBS)})
	var c Cursor
	res, err := x.Commit(&c, &r.p, r.ids)
	require.NoError(t, err)
	assert.Equal(t, CommitResult{Present: 2}, res, "committing the same blocks again is harmless")
	assert.Equal(t, 2, x.Stats().Cached)
	r.finish(t, x)
	require.NoError(t, x.CheckInvariants())
}

// With every table key equal, blocks of 16 tokens differing in any one token never match.
func TestNoFalseHitAtBlockSize16(t *testing.T) {
	pool, err := blocks.New(64)
	require.NoError(t, err)
	x, err := New(pool, 16, withKeyMask(0))
	require.NoError(t, err)
	base := toks(1, 16)
	ids, err := pool.Allocate(nil, 1)
	require.NoError(t, err)
	var c Cursor
	_, err = x.Commit(&c, &Prompt{Tokens: base}, ids)
	require.NoError(t, err)
	for i := range 16 {
		other := toks(1, 16)
		other[i] = -1
		got, _ := x.Peek(nil, &Prompt{Tokens: other}, WholePrompt)
		assert.Empty(t, got, "token %d differs", i)
	}
	got, _ := x.Peek(nil, &Prompt{Tokens: base}, WholePrompt)
	assert.Equal(t, ids, got)
}
