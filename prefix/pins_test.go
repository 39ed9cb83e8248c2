package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

func TestPinInfo(t *testing.T) {
	pool, x := newTestIndex(t, 16)
	r := admit(t, x, pool, Prompt{Tokens: toks(1, 3*testBS)}) // three cached blocks a, b, c
	a, b, c := r.ids[0], r.ids[1], r.ids[2]

	type want struct {
		parent     int
		hasParent  bool
		pinnedKids int
	}
	check := func(id int, w want) {
		t.Helper()
		p, ok, k := x.PinInfo(blocks.ID(id))
		require.Equal(t, w, want{int(p), ok, k}, "block %d", id)
	}
	check(int(a), want{0, false, 1}) // under the root, above pinned b
	check(int(b), want{int(a), true, 1})
	check(int(c), want{int(b), true, 0})
	check(15, want{0, false, 0}) // not cached
	check(-1, want{0, false, 0})

	r.finish(t, x) // nothing held: no pinned children anywhere
	check(int(a), want{0, false, 0})
	check(int(b), want{int(a), true, 0})
}
