package prefix

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// CheckInvariants must notice each kind of corruption it promises to catch.
func TestCheckInvariantsCatchesCorruption(t *testing.T) {
	build := func(t *testing.T) (*Index, *request) {
		pool, x := newTestIndex(t, 32)
		admit(t, x, pool, Prompt{Tokens: toks(1, 3*testBS)}).finish(t, x)
		r := admit(t, x, pool, Prompt{Tokens: cat(toks(1, 2*testBS), toks(50, 2*testBS))})
		require.NoError(t, x.CheckInvariants())
		return x, r
	}
	corruptions := map[string]func(x *Index, r *request){
		"child count":             func(x *Index, r *request) { x.nodes[nodeOf(r.ids[0])].children++ },
		"pinned flag":             func(x *Index, r *request) { x.nodes[nodeOf(r.ids[3])].flags &^= flagPinned },
		"parent link":             func(x *Index, r *request) { x.nodes[nodeOf(r.ids[3])].parent = nodeOf(r.ids[0]) },
		"key":                     func(x *Index, r *request) { x.nodes[nodeOf(r.ids[1])].key ^= 1 },
		"tokens":                  func(x *Index, r *request) { x.blockTokens(nodeOf(r.ids[1]))[0]++ },
		"cached count":            func(x *Index, r *request) { x.cached++ },
		"refcount vs pinned":      func(x *Index, r *request) { require.NoError(t, x.pool.Release(r.ids[3])) },
		"evictable set":           func(x *Index, r *request) { x.policy.Add(x.evictEntry(nodeOf(r.ids[3]))) },
		"lost eviction candidate": func(x *Index, r *request) { x.policy.Victim() },
	}
	for name, corrupt := range corruptions {
		t.Run(name, func(t *testing.T) {
			x, r := build(t)
			corrupt(x, r)
			assert.Error(t, x.CheckInvariants())
		})
	}
}
