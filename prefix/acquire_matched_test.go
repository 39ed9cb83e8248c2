package prefix

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// acquireMatched takes a matched path's pins along its pass instead of acquire's walk up
// from the tail. Over random trees (shared prefixes, paths held in part or wholly by
// running requests, tails that are leaves or inner blocks, eviction), both leave the same
// nodes (flags, pinned children, stamps), holders, hints, hits, pin count and eviction set.
func TestAcquireMatchedMatchesAcquire(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 7))
		poolA, a := newTestIndex(t, 48)
		poolB, b := newTestIndex(t, 48)
		var heldA, heldB []*request
		var past []Prompt
		for step := range 400 {
			p := Prompt{Tokens: cat(toks(int32(1000*rng.IntN(3)), testBS*rng.IntN(6)), toks(int32(100000+step), 1+rng.IntN(2*testBS)))}
			if len(past) > 0 && rng.IntN(3) == 0 {
				p = past[rng.IntN(len(past))] // a whole cached prompt: its tail may be an evictable leaf
			}
			past = append(past, p)
			switch k := rng.IntN(4); {
			case k == 0 && len(heldA) < 3: // a running request: its blocks stay held
				heldA = append(heldA, admit(t, a, poolA, p))
				heldB = append(heldB, admit(t, b, poolB, p))
			case k == 1 && len(heldA) > 0:
				i := rng.IntN(len(heldA))
				heldA[i].finish(t, a)
				heldB[i].finish(t, b)
				heldA = append(heldA[:i], heldA[i+1:]...)
				heldB = append(heldB[:i], heldB[i+1:]...)
			default: // the trusted acquire against the general one, then a release
				ids, _ := a.Peek(nil, &p, WholePrompt)
				idsB, _ := b.Peek(nil, &p, WholePrompt)
				require.Equal(t, ids, idsB)
				a.acquireMatched(ids)
				b.acquire(idsB, true)
				requireSameIndex(t, a, b, step)
				require.NoError(t, a.Release(ids))
				require.NoError(t, b.Release(idsB))
				if rng.IntN(8) == 0 { // some cached prompts of their own, so that some tails are leaves
					admit(t, a, poolA, p).finish(t, a)
					admit(t, b, poolB, p).finish(t, b)
				}
			}
			requireSameIndex(t, a, b, step)
		}
		require.NoError(t, a.CheckInvariants())
	}
}

func requireSameIndex(t *testing.T, a, b *Index, step int) {
	t.Helper()
	var sa, sb bytes.Buffer
	require.NoError(t, a.WriteState(&sa))
	require.NoError(t, b.WriteState(&sb))
	require.Equal(t, sa.String(), sb.String(), "step %d", step)
	require.Equal(t, keyless(a.nodes), keyless(b.nodes), "step %d", step)
	require.Equal(t, a.refs, b.refs, "step %d", step)
	require.Equal(t, a.pinned, b.pinned, "step %d", step)
	require.NoError(t, a.CheckInvariants(), "step %d", step) // the eviction set is the evictable leaves
}

// keyless is nodes without their keys, which hash with each index's own seed.
func keyless(nodes []node) []node {
	out := append([]node(nil), nodes...)
	for i := range out {
		out[i].key = 0
	}
	return out
}
