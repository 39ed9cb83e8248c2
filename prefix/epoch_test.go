package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// Bumping an epoch makes the namespace's blocks unreachable at once, even those a request
// holds; they are evicted lazily; the next commit builds a fresh tree; other namespaces
// are untouched; a cursor of the old epoch cannot commit.
func TestBumpEpoch(t *testing.T) {
	pool, x := newTestIndex(t, 33, WithEvictionHistory(64))
	ns, other := Namespace{LoRA: "a"}, Namespace{LoRA: "b"}
	held := admit(t, x, pool, Prompt{Namespace: ns, Tokens: toks(1, 4*testBS)}) // still running
	admit(t, x, pool, Prompt{Namespace: ns, Tokens: toks(100, 2*testBS)}).finish(t, x)
	admit(t, x, pool, Prompt{Namespace: other, Tokens: toks(1, 2*testBS)}).finish(t, x)
	cachedBefore := x.Stats().Cached

	require.Equal(t, uint32(1), x.BumpEpoch(ns))
	require.Equal(t, uint32(1), x.Epoch(ns))
	require.Zero(t, x.Epoch(other))
	require.NoError(t, x.CheckInvariants())
	got, _ := x.Peek(nil, &Prompt{Namespace: ns, Tokens: toks(1, 4*testBS+1)}, true)
	require.Empty(t, got, "unreachable at once, though a request holds them")
	got, _ = x.Peek(nil, &Prompt{Namespace: other, Tokens: toks(1, 2*testBS+1)}, true)
	require.Len(t, got, 2, "another namespace keeps its blocks")
	require.Equal(t, cachedBefore, x.Stats().Cached, "nothing was evicted eagerly")
	require.Equal(t, 1, x.Stats().Namespaces, "the retired root is no namespace's any more")

	var e Explanation
	x.Explain(nil, &Prompt{Namespace: ns, Tokens: toks(1, 4*testBS+1)}, leaveOne, &e)
	require.Equal(t, MissEpoch, e.Reason)
	require.Equal(t, EvictNone, e.Evicted, "still cached under the old epoch")

	// The held request's cursor belongs to the old epoch: Commit refuses it.
	var err error
	held.ids, err = pool.Allocate(held.ids, 1)
	require.NoError(t, err)
	p := Prompt{Namespace: ns, Tokens: toks(1, 5*testBS)}
	_, err = x.Commit(&held.cur, &p, held.ids[4:5])
	require.ErrorIs(t, err, ErrInvalidCursor)

	// A new request of the namespace computes and caches afresh, in a tree of its own.
	fresh := admit(t, x, pool, Prompt{Namespace: ns, Tokens: toks(1, 4*testBS)})
	require.Zero(t, fresh.hit)
	fresh.finish(t, x)
	got, _ = x.Peek(nil, &Prompt{Namespace: ns, Tokens: toks(1, 4*testBS+1)}, true)
	require.Equal(t, fresh.ids, got)
	require.NoError(t, x.CheckInvariants())

	// Released and evicted, the old blocks go lazily, by the policy, recorded as epoch.
	held.finish(t, x)
	require.Equal(t, x.Stats().Cached, x.Evict(100))
	x.Explain(nil, &Prompt{Namespace: ns, Tokens: toks(100, 2*testBS+1)}, leaveOne, &e)
	require.Equal(t, MissEpoch, e.Reason, "cached under the old epoch, and evicted since")
	require.Equal(t, EvictEpoch, e.Evicted)
	require.NoError(t, x.CheckInvariants())

	// Bumped twice, the slots of freed retired roots are tombstones, never reused.
	x.BumpEpoch(ns)
	admit(t, x, pool, Prompt{Namespace: ns, Tokens: toks(1, 2*testBS)}).finish(t, x)
	require.NoError(t, x.CheckInvariants())
	require.NoError(t, x.Reset())
	require.NoError(t, x.CheckInvariants())
	_ = blocks.NullID
}
