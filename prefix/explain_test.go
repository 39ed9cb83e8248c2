package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"

	"github.com/stretchr/testify/require"
)

func explain(x *Index, p Prompt, o LookupOptions) Explanation {
	var e Explanation
	x.Explain(nil, &p, o, &e)
	return e
}

var leaveOne = LookupOptions{LeaveOne: true}

// Every miss reason the index can produce on its own, each from a scenario that sets it up.
func TestExplainReasons(t *testing.T) {
	t.Run("none: the whole prompt matched", func(t *testing.T) {
		pool, x := newTestIndex(t, 16)
		admit(t, x, pool, Prompt{Tokens: toks(1, 3*testBS)}).finish(t, x)
		e := explain(x, Prompt{Tokens: toks(1, 2*testBS+1)}, leaveOne)
		require.Equal(t, Explanation{Reason: MissNone, MatchedBlocks: 2, FullBlocks: 2}, e)
	})
	t.Run("never stored", func(t *testing.T) {
		pool, x := newTestIndex(t, 16, WithEvictionHistory(16))
		admit(t, x, pool, Prompt{Tokens: toks(1, 2*testBS)}).finish(t, x)
		e := explain(x, Prompt{Tokens: cat(toks(1, testBS), toks(100, 2*testBS))}, leaveOne)
		require.Equal(t, MissNeverStored, e.Reason)
		require.Equal(t, 1, e.MatchedBlocks)
		e = explain(x, Prompt{Tokens: toks(500, 3*testBS)}, leaveOne) // unknown from the first block
		require.Equal(t, MissNeverStored, e.Reason)
		e = explain(x, Prompt{Namespace: Namespace{LoRA: "new"}, Tokens: toks(500, 3*testBS)}, leaveOne)
		require.Equal(t, MissNeverStored, e.Reason, "a namespace without a root")
	})
	t.Run("evicted by the policy, with when", func(t *testing.T) {
		pool, x := newTestIndex(t, 16, WithEvictionHistory(16))
		admit(t, x, pool, Prompt{Tokens: toks(1, 3*testBS)}).finish(t, x)
		require.Equal(t, 1, x.Evict(1)) // the tail: block 2 of the chain
		now := x.clock.Now()
		e := explain(x, Prompt{Tokens: toks(1, 3*testBS+1)}, leaveOne)
		require.Equal(t, Explanation{Reason: MissEvicted, Evicted: EvictPolicy, EvictedAt: now, MatchedBlocks: 2, FullBlocks: 3}, e)
	})
	t.Run("evicted for the pool", func(t *testing.T) {
		pool, x := newTestIndex(t, 5, WithEvictionHistory(8)) // 4 usable blocks
		admit(t, x, pool, Prompt{Tokens: toks(1, 4*testBS)}).finish(t, x)
		ids, err := pool.Allocate(nil, 1) // the pool reclaims the LRU block: the tail
		require.NoError(t, err)
		defer func() { require.NoError(t, pool.Release(ids...)) }()
		e := explain(x, Prompt{Tokens: toks(1, 4*testBS+1)}, leaveOne)
		require.Equal(t, MissEvicted, e.Reason)
		require.Equal(t, EvictPolicy, e.Evicted)
		require.Equal(t, 3, e.MatchedBlocks)
	})
	t.Run("without history an evicted block reads as never stored", func(t *testing.T) {
		pool, x := newTestIndex(t, 16)
		admit(t, x, pool, Prompt{Tokens: toks(1, 2*testBS)}).finish(t, x)
		x.Evict(1)
		require.Equal(t, MissNeverStored, explain(x, Prompt{Tokens: toks(1, 2*testBS+1)}, leaveOne).Reason)
	})
	t.Run("dropped by reset", func(t *testing.T) {
		pool, x := newTestIndex(t, 16, WithEvictionHistory(16))
		admit(t, x, pool, Prompt{Tokens: toks(1, 2*testBS)}).finish(t, x)
		require.NoError(t, x.Reset())
		e := explain(x, Prompt{Tokens: toks(1, 2*testBS+1)}, leaveOne)
		require.Equal(t, MissEvicted, e.Reason)
		require.Equal(t, EvictReset, e.Evicted)
		require.Equal(t, 0, e.MatchedBlocks)
	})
	t.Run("below the match unit: diverges inside a block", func(t *testing.T) {
		pool, x := newTestIndex(t, 16)
		admit(t, x, pool, Prompt{Tokens: toks(1, 2*testBS)}).finish(t, x)
		p := toks(1, 3*testBS)
		p[testBS+2] = 999 // block 1 agrees for 2 tokens
		e := explain(x, Prompt{Tokens: p}, leaveOne)
		require.Equal(t, Explanation{Reason: MissBelowUnit, MatchedBlocks: 1, FullBlocks: 3, SharedTokens: 2}, e)
	})
	t.Run("below the match unit: the shared tail is a partial block", func(t *testing.T) {
		pool, x := newTestIndex(t, 16)
		admit(t, x, pool, Prompt{Tokens: toks(1, 2*testBS)}).finish(t, x)
		e := explain(x, Prompt{Tokens: toks(1, testBS+3)}, leaveOne) // 3 of block 1's tokens
		require.Equal(t, Explanation{Reason: MissBelowUnit, MatchedBlocks: 1, FullBlocks: 1, SharedTokens: 2}, e,
			"the cap leaves the last token out, so two tokens of the partial block agree")
		e = explain(x, Prompt{Tokens: toks(1, testBS-1)}, leaveOne) // shorter than a block
		require.Equal(t, MissBelowUnit, e.Reason)
		require.Equal(t, 0, e.MatchedBlocks)
	})
	t.Run("namespace mismatch", func(t *testing.T) {
		pool, x := newTestIndex(t, 16)
		admit(t, x, pool, Prompt{Namespace: Namespace{LoRA: "a"}, Tokens: toks(1, 2*testBS)}).finish(t, x)
		e := explain(x, Prompt{Namespace: Namespace{LoRA: "b"}, Tokens: toks(1, 2*testBS+1)}, leaveOne)
		require.Equal(t, MissNamespace, e.Reason)
		e = explain(x, Prompt{Tokens: toks(1, 2*testBS+1)}, leaveOne)
		require.Equal(t, MissNamespace, e.Reason, "the base model does not see the adapter's blocks")
	})
	t.Run("salt mismatch", func(t *testing.T) {
		pool, x := newTestIndex(t, 16)
		admit(t, x, pool, Prompt{Namespace: Namespace{Salt: "tenant-a"}, Tokens: toks(1, 2*testBS)}).finish(t, x)
		e := explain(x, Prompt{Namespace: Namespace{Salt: "tenant-b"}, Tokens: toks(1, 2*testBS+1)}, leaveOne)
		require.Equal(t, MissSalt, e.Reason)
		e = explain(x, Prompt{Tokens: toks(1, 2*testBS+1)}, leaveOne)
		require.Equal(t, MissSalt, e.Reason, "no salt against a salted copy")
	})
	t.Run("capped at len - 1", func(t *testing.T) {
		pool, x := newTestIndex(t, 16)
		admit(t, x, pool, Prompt{Tokens: toks(1, 2*testBS)}).finish(t, x)
		e := explain(x, Prompt{Tokens: toks(1, 2*testBS)}, leaveOne)
		require.Equal(t, Explanation{Reason: MissCapped, MatchedBlocks: 1, FullBlocks: 2}, e)
		e = explain(x, Prompt{Tokens: toks(1, 2*testBS)}, LookupOptions{})
		require.Equal(t, Explanation{Reason: MissNone, MatchedBlocks: 2, FullBlocks: 2}, e)
	})
	t.Run("dropped for EAGLE", func(t *testing.T) {
		pool, x := newTestIndex(t, 16)
		admit(t, x, pool, Prompt{Tokens: toks(1, 3*testBS)}).finish(t, x)
		p := Prompt{Tokens: toks(1, 3*testBS+1)}
		var e Explanation
		ids, c := x.Explain(nil, &p, LookupOptions{LeaveOne: true, EAGLE: true}, &e)
		require.Equal(t, Explanation{Reason: MissEAGLE, MatchedBlocks: 2, FullBlocks: 3}, e)
		want, _ := x.Peek(nil, &Prompt{Tokens: toks(1, 2*testBS+1)}, LeaveOne)
		require.Equal(t, want, ids)
		require.Equal(t, 2, c.Blocks())
		// The cursor is usable: committing the dropped block again finds it present.
		res, err := x.Commit(&c, &p, nil)
		require.NoError(t, err)
		require.Equal(t, CommitResult{}, res)
	})
	t.Run("namespace required", func(t *testing.T) {
		pool, x := newTestIndex(t, 16, WithNamespaceRequired())
		admit(t, x, pool, Prompt{Namespace: Namespace{Salt: "s"}, Tokens: toks(1, 2*testBS)}).finish(t, x)
		require.Equal(t, MissNamespaceRequired, explain(x, Prompt{Tokens: toks(1, 2*testBS+1)}, leaveOne).Reason)
	})
}

// Explain returns exactly what Peek returns and counts nothing.
func TestExplainMatchesPeek(t *testing.T) {
	pool, x := newTestIndex(t, 32, WithEvictionHistory(32))
	admit(t, x, pool, Prompt{Tokens: toks(1, 4*testBS)}).finish(t, x)
	admit(t, x, pool, Prompt{Tokens: cat(toks(1, 2*testBS), toks(50, 2*testBS))}).finish(t, x)
	x.Evict(1)
	before := x.Stats()
	for _, p := range []Prompt{
		{Tokens: toks(1, 4*testBS+1)}, {Tokens: toks(1, 4*testBS)}, {Tokens: cat(toks(1, 2*testBS), toks(50, 2*testBS+2))},
		{Tokens: toks(7, 3)}, {Namespace: Namespace{Salt: "x"}, Tokens: toks(1, 9)},
	} {
		for _, o := range []LookupOptions{{}, leaveOne} {
			want, wc := x.Peek(nil, &p, HitLimit(o.LeaveOne))
			var e Explanation
			got, gc := x.Explain(nil, &p, o, &e)
			require.Equal(t, want, got)
			require.Equal(t, wc, gc)
			require.Equal(t, len(got), e.MatchedBlocks)
		}
	}
	require.Equal(t, before, x.Stats())
}

func TestMissReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range MissReasons() {
		require.NotEqual(t, "unknown", r.String())
		require.False(t, seen[r.String()], r.String())
		seen[r.String()] = true
	}
	require.Equal(t, "unknown", numMissReasons.String())
	require.Equal(t, "quota", EvictQuota.String())
	require.Equal(t, "unknown", numEvictCauses.String())
}

func TestExplainAllocatesNothing(t *testing.T) {
	pool, x := newTestIndex(t, 64, WithEvictionHistory(64))
	admit(t, x, pool, Prompt{Tokens: toks(1, 8*testBS)}).finish(t, x)
	admit(t, x, pool, Prompt{Namespace: Namespace{Salt: "s"}, Tokens: toks(1, 2*testBS)}).finish(t, x)
	x.Evict(1)
	dst := make([]blocks.ID, 0, 16)
	prompts := []Prompt{{Tokens: toks(1, 8*testBS+1)}, {Tokens: toks(1, 5*testBS+2)}, {Namespace: Namespace{Salt: "t"}, Tokens: toks(1, 9)}}
	var e Explanation
	for _, p := range prompts {
		allocs := testing.AllocsPerRun(100, func() { dst, _ = x.Explain(dst[:0], &p, leaveOne, &e) })
		require.Zero(t, allocs)
	}
}
