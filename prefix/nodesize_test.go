package prefix

import (
	"testing"
	"unsafe"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A node is two cache lines: the block's own state on the first (which a commit, a
// release, an acquire and an eviction each touch once) and its tokens on the second.
func TestNodeIsTwoCacheLines(t *testing.T) {
	assert.Equal(t, uintptr(128), unsafe.Sizeof(node{}))
	assert.Equal(t, uintptr(64), unsafe.Offsetof(node{}.tok))
}

// Each node is one 128-byte-aligned pair of lines, which the L2's spatial prefetcher
// fetches together, for small pools (a size class) and large ones (page-aligned), and
// after the array grows for namespace roots. Only speed depends on it.
func TestNodesArePairAligned(t *testing.T) {
	for _, nb := range []int{1, 5, 100, 30_000} {
		pool, err := blocks.New(nb)
		require.NoError(t, err)
		x, err := New(pool, 16)
		require.NoError(t, err)
		assert.Zero(t, uintptr(unsafe.Pointer(&x.nodes[0]))%128, "pool of %d", nb)
		for i := range 3 {
			x.ensureRoot(Namespace{Salt: string(rune('a' + i))})
		}
		assert.Zero(t, uintptr(unsafe.Pointer(&x.nodes[0]))%128, "pool of %d with roots", nb)
	}
}

// Blocks of up to 16 tokens keep them in the node; longer ones in the arena.
func TestTokensInlineUpTo16(t *testing.T) {
	for _, bs := range []int{1, 4, 16, 17, 32} {
		pool, err := blocks.New(8)
		require.NoError(t, err)
		x, err := New(pool, bs)
		require.NoError(t, err)
		assert.Equal(t, bs <= 16, x.inline, "bs %d", bs)
		assert.Equal(t, bs <= 16, x.tokens == nil, "bs %d", bs)
		assert.Len(t, x.blockTokens(nodeOf(3)), bs)
	}
}

// BenchmarkNodeTokensPaired measures the commit's memory pattern (bump a node's
// generation, write its tokens) at random nodes of a 64 MiB array, far past the L2: with
// the tokens on the node's second line (paired, today's layout) and with them in an arena
// beside 64-byte nodes (separate, the layout before). Not a test of kvpage's code: it shows
// what the layout buys on the machine it runs on.
func BenchmarkNodeTokensPaired(b *testing.B) {
	const n = 1 << 19
	ix := make([]int32, 1<<16)
	s := uint32(12345)
	for i := range ix {
		s = s*1664525 + 1013904223
		ix[i] = int32(s >> 12 % n)
	}
	var src [16]int32
	b.Run("paired", func(b *testing.B) {
		nodes := make([]node, n)
		for i := 0; b.Loop(); i++ {
			nd := &nodes[ix[i&(len(ix)-1)]]
			nd.gen++
			nd.tok = src
		}
	})
	b.Run("separate", func(b *testing.B) {
		type line struct {
			gen uint32
			_   [60]byte
		}
		nodes := make([]line, n)
		tokens := make([][16]int32, n)
		for i := 0; b.Loop(); i++ {
			j := ix[i&(len(ix)-1)]
			nodes[j].gen++
			tokens[j] = src
		}
	})
}
