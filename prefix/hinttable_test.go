package prefix

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// tableLen counts the child table's occupied slots.
func tableLen(x *Index) int {
	n := 0
	for _, s := range x.table.slots {
		if s.n != 0 {
			n++
		}
	}
	return n
}

// TestHintChildIsNotInTheTable: a chain of first children costs no table slot (each is its
// parent's hint), a second child under a node goes into the table, an acquire that moves
// the hint swaps the two, and evicting the hint child leaves its sibling findable.
func TestHintChildIsNotInTheTable(t *testing.T) {
	pool, x := newTestIndex(t, 16)
	sys := toks(1, 2*testBS)
	a := cat(sys, toks(100, testBS))
	b := cat(sys, toks(200, testBS))
	idsA := cacheFull(t, x, pool, Prompt{Tokens: a})
	require.Zero(t, tableLen(x), "a chain of first children went into the table")
	idsB := cacheFull(t, x, pool, Prompt{Tokens: b})
	require.Equal(t, 1, tableLen(x), "the second child of the system prompt's tail")
	require.Equal(t, nodeOf(idsA[2]), x.nodes[nodeOf(idsA[1])].hint)

	// Reusing b's tail moves the hint to it: a's tail goes into the table instead.
	got, _ := x.Peek(nil, &Prompt{Tokens: b}, WholePrompt)
	require.Equal(t, idsB, got)
	require.NoError(t, x.Acquire(got))
	require.Equal(t, nodeOf(idsB[2]), x.nodes[nodeOf(idsB[1])].hint)
	require.Equal(t, 1, tableLen(x))
	require.NoError(t, x.CheckInvariants())
	require.NoError(t, x.Release(got))

	// Evict the hint child (b's tail, the only evictable leaf once a is held): a's tail
	// stays findable through the table.
	held, _ := x.Peek(nil, &Prompt{Tokens: a}, WholePrompt)
	require.NoError(t, x.Acquire(held))
	require.Equal(t, 1, x.Evict(1))
	require.False(t, x.IsCached(idsB[2]))
	require.NoError(t, x.CheckInvariants())
	got, _ = x.Peek(nil, &Prompt{Tokens: a}, WholePrompt)
	require.Equal(t, idsA, got)
	require.NoError(t, x.Release(held))
	require.NoError(t, x.CheckInvariants())
}
