package prefix

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSharedSystemPrompt(t *testing.T) {
	pool, x := newTestIndex(t, 64)
	sys := toks(1000, 4*testBS)
	a := admit(t, x, pool, Prompt{Tokens: cat(sys, toks(1, 2*testBS))})
	assert.Equal(t, 0, a.hit)
	a.finish(t, x)

	b := admit(t, x, pool, Prompt{Tokens: cat(sys, toks(500, 2*testBS+1))})
	assert.Equal(t, 4, b.hit, "the system prompt's four blocks hit")
	assert.Equal(t, a.p.Tokens[:4*testBS], b.p.Tokens[:4*testBS])
	s := x.Stats()
	assert.Equal(t, 6+2, s.Cached, "one copy of the system prompt, two own blocks each")
	assert.Equal(t, uint64(4*testBS), s.HitTokens)
	assert.Equal(t, 1, s.Evictable, "a's last block is the one unreferenced leaf; b holds the rest")
	assert.Equal(t, 2, x.Reclaimable(), "a's two own blocks can go")
	b.finish(t, x)
	require.NoError(t, x.CheckInvariants())
	assert.Equal(t, x.Stats().Cached, x.Reclaimable())
}

func TestDivergenceInsideABlock(t *testing.T) {
	pool, x := newTestIndex(t, 64)
	base := toks(1, 3*testBS)
	admit(t, x, pool, Prompt{Tokens: base}).finish(t, x)

	other := append([]int32(nil), base...)
	other[2*testBS+1] = -7 // the third block differs in its second token
	got, cur := x.Peek(nil, &Prompt{Tokens: other}, WholePrompt)
	assert.Len(t, got, 2, "only the fully shared blocks hit")
	assert.Equal(t, 2, cur.Blocks())

	got, _ = x.Peek(nil, &Prompt{Tokens: base}, WholePrompt)
	assert.Len(t, got, 3)
	got, _ = x.Peek(nil, &Prompt{Tokens: base}, LeaveOne)
	assert.Len(t, got, 2, "leaveOne keeps the last token to compute")
	got, _ = x.Peek(nil, &Prompt{Tokens: base[:2*testBS+3]}, WholePrompt)
	assert.Len(t, got, 2, "a partial last block never matches")
}

func TestLRUEvictionOrder(t *testing.T) {
	pool, x := newTestIndex(t, 64)
	// a: 2 blocks, b: 1 block, then c shares a's first block and adds one.
	a := admit(t, x, pool, Prompt{Tokens: toks(100, 2*testBS)})
	b := admit(t, x, pool, Prompt{Tokens: toks(200, 1*testBS)})
	a.finish(t, x) // a's blocks: tail older than head
	b.finish(t, x)
	aHead, aTail, bOnly := a.ids0(0), a.ids0(1), b.ids0(0)

	var evicted []blocks.ID
	x.SetObserverForTest(&recorder{onRemoved: func(ids []blocks.ID) { evicted = append(evicted, ids...) }})
	assert.Equal(t, 1, x.Evict(1))
	assert.Equal(t, []blocks.ID{aTail}, evicted, "a's tail was released first")
	// a's head is now a leaf with its own last access, older than b's.
	assert.Equal(t, 1, x.Evict(1))
	assert.Equal(t, []blocks.ID{aTail, aHead}, evicted)
	assert.Equal(t, 1, x.Evict(5))
	assert.Equal(t, []blocks.ID{aTail, aHead, bOnly}, evicted)
	assert.Equal(t, 0, x.Evict(1))
	require.NoError(t, x.CheckInvariants())
}

func TestTouchOnAcquireReordersEviction(t *testing.T) {
	pool, x := newTestIndex(t, 64)
	a := admit(t, x, pool, Prompt{Tokens: toks(100, testBS)})
	b := admit(t, x, pool, Prompt{Tokens: toks(200, testBS)})
	a.finish(t, x)
	b.finish(t, x)
	// A lookup alone touches nothing: a is still the oldest.
	x.Peek(nil, &Prompt{Tokens: toks(100, testBS)}, WholePrompt)
	// Re-acquiring and releasing a makes it the newest.
	c := admit(t, x, pool, Prompt{Tokens: toks(100, testBS+1)})
	require.Equal(t, 1, c.hit)
	c.finish(t, x)
	var evicted []blocks.ID
	x.SetObserverForTest(&recorder{onRemoved: func(ids []blocks.ID) { evicted = append(evicted, ids...) }})
	x.Evict(1)
	assert.Equal(t, []blocks.ID{b.ids0(0)}, evicted)
}

func TestNamespaceIsolation(t *testing.T) {
	pool, x := newTestIndex(t, 64)
	tk := toks(1, 3*testBS)
	admit(t, x, pool, Prompt{Tokens: tk, Namespace: Namespace{LoRA: "sql"}}).finish(t, x)
	for _, ns := range []Namespace{{}, {LoRA: "chat"}, {Salt: "tenant-a"}, {LoRA: "sql", Salt: "x"}} {
		got, _ := x.Peek(nil, &Prompt{Tokens: tk, Namespace: ns}, WholePrompt)
		assert.Empty(t, got, "namespace %+v", ns)
	}
	got, _ := x.Peek(nil, &Prompt{Tokens: tk, Namespace: Namespace{LoRA: "sql"}}, WholePrompt)
	assert.Len(t, got, 3)
	r := admit(t, x, pool, Prompt{Tokens: tk, Namespace: Namespace{Salt: "tenant-a"}})
	assert.Equal(t, 0, r.hit)
	r.finish(t, x)
	assert.Equal(t, 6, x.Stats().Cached, "each namespace keeps its own copy")
	assert.Equal(t, 2, x.Stats().Namespaces)
}

func TestMultimodalExtraKeys(t *testing.T) {
	pool, x := newTestIndex(t, 64)
	tk := cat(toks(1, testBS), make([]int32, 2*testBS)) // block 0 text, blocks 1-2 image placeholders
	img := func(h string) []MMInput { return []MMInput{{Hash: h, Offset: testBS, Length: 2 * testBS}} }
	admit(t, x, pool, Prompt{Tokens: tk, MM: img("cat")}).finish(t, x)
	got, _ := x.Peek(nil, &Prompt{Tokens: tk, MM: img("dog")}, WholePrompt)
	assert.Len(t, got, 1, "same placeholder tokens, another image: only the text block hits")
	got, _ = x.Peek(nil, &Prompt{Tokens: tk, MM: img("cat")}, WholePrompt)
	assert.Len(t, got, 3)
	got, _ = x.Peek(nil, &Prompt{Tokens: tk}, WholePrompt)
	assert.Len(t, got, 1, "text with the same tokens is not the image")
}

func TestResetRefusedWhileHeld(t *testing.T) {
	pool, x := newTestIndex(t, 64)
	admit(t, x, pool, Prompt{Tokens: toks(1, 2*testBS)}).finish(t, x)
	r := admit(t, x, pool, Prompt{Tokens: toks(1, 2*testBS+1)})
	require.Equal(t, 2, r.hit)
	before := snap(x, pool)
	err := x.Reset()
	assert.ErrorIs(t, err, ErrBlocksHeld)
	assert.Equal(t, before, snap(x, pool))
	r.finish(t, x)
	cleared := 0
	x.SetObserverForTest(&recorder{onCleared: func() { cleared++ }})
	require.NoError(t, x.Reset())
	assert.Equal(t, 1, cleared)
	assert.Equal(t, 0, x.Stats().Cached)
	assert.Equal(t, pool.Capacity(), pool.NumFree(), "every block is back in the pool")
	require.NoError(t, x.CheckInvariants())
}

func TestDuplicateCommit(t *testing.T) {
	pool, x := newTestIndex(t, 64)
	tk := toks(1, 3*testBS+2)
	// a and b arrive together: neither hits, both compute the same prompt.
	a := admit(t, x, pool, Prompt{Tokens: tk})
	b := &request{p: Prompt{Tokens: tk}}
	b.ids, b.cur = x.Peek(nil, &Prompt{Tokens: toks(1, 1)}, LeaveOne) // b matched before a committed
	var err error
	b.ids, err = pool.Allocate(b.ids, 4)
	require.NoError(t, err)
	res, err := x.Commit(&b.cur, &b.p, b.ids[:3])
	require.NoError(t, err)
	assert.Equal(t, CommitResult{Duplicates: 3}, res)
	for i := 0; i < 3; i++ {
		assert.False(t, x.IsCached(b.ids[i]), "b's copies stay uncached")
		assert.Equal(t, 1, pool.RefCount(b.ids[i]), "and held by b alone")
		assert.Equal(t, 2, pool.RefCount(a.ids[i]), "a's copies stay cached")
	}
	// b's next block chains under a's copies.
	b.p.Tokens = append(b.p.Tokens, 77, 78)
	res, err = x.Commit(&b.cur, &b.p, b.ids[3:4])
	require.NoError(t, err)
	assert.Equal(t, CommitResult{Stored: 1}, res)
	got, _ := x.Peek(nil, &b.p, WholePrompt)
	assert.Equal(t, append(append([]blocks.ID(nil), a.ids[:3]...), b.ids[3]), got)

	free := pool.NumFree()
	b.finish(t, x)
	assert.Equal(t, free+3, pool.NumFree(), "b's duplicates went back to the pool")
	a.finish(t, x)
	assert.Equal(t, uint64(3), x.Stats().Duplicates)
	require.NoError(t, x.CheckInvariants())
}

func TestReclaimerWithPool(t *testing.T) {
	pool, x := newTestIndex(t, 9) // 8 usable blocks
	a := admit(t, x, pool, Prompt{Tokens: toks(1, 3*testBS)})
	b := admit(t, x, pool, Prompt{Tokens: toks(100, 3*testBS)})
	a.finish(t, x)
	b.finish(t, x)
	assert.Equal(t, 2, pool.NumFree())
	assert.Equal(t, 6, x.Reclaimable())
	assert.Equal(t, 8, pool.Available())

	// The free list goes first: two blocks need no eviction.
	ids, err := pool.Allocate(nil, 2)
	require.NoError(t, err)
	assert.Equal(t, uint64(0), x.Stats().Evictions)
	// Three more evict a's path, tail first.
	ids, err = pool.Allocate(ids, 3)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), x.Stats().Evictions)
	got, _ := x.Peek(nil, &Prompt{Tokens: toks(1, 3*testBS)}, WholePrompt)
	assert.Empty(t, got)
	got, _ = x.Peek(nil, &Prompt{Tokens: toks(100, 3*testBS)}, WholePrompt)
	assert.Len(t, got, 3)

	// Holding b's middle block pins b's head too; only b's tail is reclaimable.
	require.NoError(t, x.Acquire(got[:2]))
	assert.Equal(t, 1, x.Reclaimable())
	before := snap(x, pool)
	_, err = pool.Allocate(ids, 2)
	assert.ErrorIs(t, err, blocks.ErrOutOfBlocks)
	assert.Equal(t, before.stats, x.Stats(), "a failed allocation evicts nothing")
	require.NoError(t, x.Release(got[:2]))
	require.NoError(t, pool.Release(ids...))
	require.NoError(t, x.CheckInvariants())
	require.NoError(t, pool.CheckInvariants())
}

func TestBadInputChangesNothing(t *testing.T) {
	pool, x := newTestIndex(t, 32)
	a := admit(t, x, pool, Prompt{Tokens: toks(1, 2*testBS+1)})
	free, err := pool.Allocate(nil, 1)
	require.NoError(t, err)
	require.NoError(t, pool.Release(free...))
	own, err := pool.Allocate(nil, 2)
	require.NoError(t, err)
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"commit beyond the prompt", func() error {
			var c Cursor
			_, err := x.Commit(&c, &Prompt{Tokens: toks(9, testBS)}, own)
			return err
		}, ErrLengthMismatch},
		{"commit a free block", func() error {
			var c Cursor
			_, err := x.Commit(&c, &Prompt{Tokens: toks(9, 2*testBS)}, []blocks.ID{own[0], free[0]})
			return err
		}, ErrNotHeld},
		{"commit the null block", func() error {
			var c Cursor
			_, err := x.Commit(&c, &Prompt{Tokens: toks(9, testBS)}, []blocks.ID{blocks.NullID})
			return err
		}, ErrNotHeld},
		{"commit a block cached elsewhere", func() error {
			var c Cursor
			_, err := x.Commit(&c, &Prompt{Tokens: toks(9, 2*testBS)}, []blocks.ID{own[0], a.ids[0]})
			return err
		}, ErrAlreadyCached},
		{"commit one block twice", func() error {
			var c Cursor
			_, err := x.Commit(&c, &Prompt{Tokens: toks(9, 2*testBS)}, []blocks.ID{own[0], own[0]})
			return err
		}, ErrAlreadyCached},
		{"commit into a new namespace, twice the same block", func() error {
			var c Cursor
			_, err := x.Commit(&c, &Prompt{Tokens: toks(9, 2*testBS), Namespace: Namespace{Salt: "s"}}, []blocks.ID{own[0], own[0]})
			return err
		}, ErrAlreadyCached},
		{"acquire an uncached block", func() error { return x.Acquire([]blocks.ID{a.ids[0], own[0]}) }, ErrNotCached},
		{"release a cached block not acquired", func() error {
			return x.Release([]blocks.ID{own[0], a.ids[0], a.ids[0]})
		}, ErrNotAcquired},
		{"release a free block", func() error { return x.Release([]blocks.ID{own[0], free[0]}) }, blocks.ErrDoubleFree},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := snap(x, pool)
			err := tc.call()
			require.Error(t, err)
			assert.True(t, errors.Is(err, tc.want), "got %v, want %v", err, tc.want)
			assert.Equal(t, before, snap(x, pool))
			require.NoError(t, x.CheckInvariants())
		})
	}
}

func TestNamespaceRequired(t *testing.T) {
	pool, x := newTestIndex(t, 16, WithNamespaceRequired())
	ids, err := pool.Allocate(nil, 1)
	require.NoError(t, err)
	var c Cursor
	_, err = x.Commit(&c, &Prompt{Tokens: toks(1, testBS)}, ids)
	assert.ErrorIs(t, err, ErrEmptyNamespace)
	_, err = x.Commit(&c, &Prompt{Tokens: toks(1, testBS), Namespace: Namespace{Salt: "t"}}, ids)
	assert.NoError(t, err)
}

// ReclaimableOf a matched path is exactly what acquiring it takes off Reclaimable, even
// when a block only the index holds is pinned by a held descendant.
func TestReclaimableOfMatchedPath(t *testing.T) {
	pool, x := newTestIndex(t, 32)
	tk := toks(1, 4*testBS)
	admit(t, x, pool, Prompt{Tokens: tk}).finish(t, x)
	deep, _ := x.Peek(nil, &Prompt{Tokens: tk}, WholePrompt)
	require.NoError(t, x.Acquire(deep[3:])) // a held leaf pins its three ancestors
	assert.Equal(t, 0, x.Reclaimable())
	short := Prompt{Tokens: tk[:2*testBS]}
	hit, _ := x.Peek(nil, &short, WholePrompt)
	assert.Equal(t, 0, x.ReclaimableOf(hit), "refcount 1 but pinned: acquiring them frees nothing up")
	require.NoError(t, x.Release(deep[3:]))
	before := x.Reclaimable()
	assert.Equal(t, 2, x.ReclaimableOf(hit))
	require.NoError(t, x.Acquire(hit))
	assert.Equal(t, before-2, x.Reclaimable())
}
