package hybrid_test

import (
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
	"pgregory.net/rapid"
)

// tierGeometry is the tier machine's block sizes: each group's block of 2, 4 or 8 tokens
// (drawTierBlock), and a match unit dividing them all, their greatest common divisor or a
// smaller power of two, so that a group's block may span several units (its parent
// block that many nodes up, where requeuePrefix, leafFirst and the closure check must
// look) and the groups may differ in block size (a hit then ends on a multiple of their
// LCM).
type tierGeometry struct {
	bs   []int // tokens per block, per group
	k    []int // match units per block, per group
	unit int   // tokens per match unit (hybrid.Config.MatchUnit)
	lcm  int   // the block sizes' LCM (the largest: they are powers of two)
	// per is how many blocks of the groups a token span takes, relative to blocks of 4
	// tokens in every group: the machine's pool and tiers grow by it, and its prompts by
	// lcm/4, so that they hold and evict about as many prompts as with blocks of 4.
	per float64
}

// drawTierBlock draws a group's block size.
func drawTierBlock(rt *rapid.T, label string) int {
	return rapid.SampledFrom([]int{2, 4, 8}).Draw(rt, label)
}

// newTierGeometry is specs' geometry, with a match unit drawn.
func newTierGeometry(rt *rapid.T, specs []hybrid.Spec) *tierGeometry {
	g := &tierGeometry{lcm: 1}
	gcd := 0
	for _, s := range specs {
		b := s.BlockSize()
		g.bs = append(g.bs, b)
		gcd = gcdOf(gcd, b)
		g.lcm = g.lcm / gcdOf(g.lcm, b) * b
	}
	g.unit = gcd >> rapid.IntRange(0, 2).Draw(rt, "unit shift")
	g.unit = max(g.unit, 1)
	for _, b := range g.bs {
		g.k = append(g.k, b/g.unit)
		g.per += float64(g.lcm) / float64(b) / float64(len(specs))
	}
	return g
}

// scaled is n, a count for blocks of 4 tokens, for this geometry's blocks.
func (g *tierGeometry) scaled(n int) int { return max(1, int(float64(n)*g.per+0.5)) }

// tokens is n, a token count for blocks of 4, for this geometry's (its LCM's) blocks.
func (g *tierGeometry) tokens(n int) int { return n * g.lcm / 4 }

// unitHashes are the event hashes of prompt's first units units, as the tree's nodes
// have them (prefix.Fast64, chained per unit).
func (g *tierGeometry) unitHashes(prompt []int32, units int) [][]byte {
	h := make([]byte, 8)
	prefix.Fast64{}.Root(h)
	out := make([][]byte, units)
	for u := range units {
		nh := make([]byte, 8)
		prefix.Fast64{}.Block(nh, h, prompt[u*g.unit:(u+1)*g.unit], prefix.Extra{})
		out[u], h = nh, nh
	}
	return out
}

// blockHash is group grp's block i's event hash: its last unit's.
func (g *tierGeometry) blockHash(hs [][]byte, grp, i int) []byte { return hs[(i+1)*g.k[grp]-1] }

func gcdOf(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
