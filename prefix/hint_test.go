package prefix

import (
	"fmt"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cacheFull matches p, acquires the hit, allocates and commits the rest of its full blocks
// and releases everything, leaving p cached and evictable. It returns p's blocks.
func cacheFull(t *testing.T, x *Index, pool *blocks.Pool, p Prompt) []blocks.ID {
	t.Helper()
	ids, cur := x.Peek(nil, &p, WholePrompt)
	hit := len(ids)
	require.NoError(t, x.Acquire(ids))
	ids, err := pool.Allocate(ids, len(p.Tokens)/x.BlockSize()-hit)
	require.NoError(t, err)
	_, err = x.Commit(&cur, &p, ids[hit:])
	require.NoError(t, err)
	require.NoError(t, x.Release(ids))
	require.NoError(t, x.CheckInvariants())
	return ids
}

// TestHintFollowsReuse pins which child Match tries first, at both loop shapes (blocks of
// 4 and the unrolled blocks of 16): a new child takes the hint only from nobody, an acquire
// moves it to the child reused, an eviction clears it, a multimodal child never has it,
// and whatever the hint, Match finds exactly the right child.
func TestHintFollowsReuse(t *testing.T) {
	for _, bs := range []int{4, 16} {
		t.Run(fmt.Sprintf("bs=%d", bs), func(t *testing.T) {
			pool, err := blocks.New(32, blocks.WithNullBlock())
			require.NoError(t, err)
			x, err := New(pool, bs)
			require.NoError(t, err)
			sys := toks(1000, 2*bs)
			prompt := func(tail int32) Prompt { return Prompt{Tokens: cat(sys, toks(tail, bs))} }

			a := cacheFull(t, x, pool, prompt(1))
			assert.Equal(t, a[1], x.hintOf(a[0]), "the first child committed takes the hint")
			assert.Equal(t, a[2], x.hintOf(a[1]))
			assert.Equal(t, blocks.ID(-1), x.hintOf(a[2]), "a leaf has no hint")

			b := cacheFull(t, x, pool, prompt(2))
			require.Equal(t, a[:2], b[:2], "b shares the system prompt")
			assert.Equal(t, a[2], x.hintOf(a[1]), "b's new tail does not take the hint from a's")
			got, _ := x.Peek(nil, &Prompt{Tokens: prompt(2).Tokens}, WholePrompt)
			assert.Equal(t, b, got, "a child that is not the hint is still found")

			c := cacheFull(t, x, pool, prompt(2))
			assert.Equal(t, b, c, "c reuses all of b")
			assert.Equal(t, b[2], x.hintOf(a[1]), "acquiring b's tail moved the hint to it")
			got, _ = x.Peek(nil, &Prompt{Tokens: prompt(1).Tokens}, WholePrompt)
			assert.Equal(t, a, got, "the old hint's child is still found")

			// The two tails are the only leaves: a's (older) goes first, then b's, the hint.
			require.Equal(t, 2, x.Evict(2))
			assert.Equal(t, blocks.ID(-1), x.hintOf(a[1]), "evicting the hinted child clears the hint")
			got, _ = x.Peek(nil, &Prompt{Tokens: prompt(1).Tokens}, WholePrompt)
			assert.Equal(t, a[:2], got)

			mm := prompt(3)
			mm.MM = []MMInput{{Hash: "img", Offset: 2 * bs, Length: bs}}
			d := cacheFull(t, x, pool, mm)
			assert.Equal(t, blocks.ID(-1), x.hintOf(a[1]), "a multimodal child never takes the hint")
			got, _ = x.Peek(nil, &Prompt{Tokens: mm.Tokens}, WholePrompt)
			assert.Equal(t, a[:2], got, "the same tokens without the image do not match the image's block")
			got, _ = x.Peek(nil, &mm, WholePrompt)
			assert.Equal(t, d, got)

			e := cacheFull(t, x, pool, prompt(3))
			assert.NotEqual(t, d[2], e[2], "the text block is cached beside the image's")
			assert.Equal(t, e[2], x.hintOf(a[1]), "the text child takes the free hint")
			got, _ = x.Peek(nil, &mm, WholePrompt)
			assert.Equal(t, d, got, "the image's block is found past a text hint with the same tokens")
			got, _ = x.Peek(nil, &Prompt{Tokens: prompt(4).Tokens}, WholePrompt)
			assert.Equal(t, a[:2], got, "past a wrong hint, the table has no such child either")
			require.NoError(t, x.Reset())
			assert.Equal(t, blocks.ID(-1), x.hintOf(a[0]), "Reset clears every hint")
		})
	}
}
