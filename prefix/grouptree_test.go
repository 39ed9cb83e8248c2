package prefix

import (
	"slices"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func newTestTree(t testing.TB, numBlocks, unit, groups int) *GroupTree {
	t.Helper()
	g, err := NewGroupTree(numBlocks, unit, groups)
	require.NoError(t, err)
	return g
}

// pathOf ensures the nodes of toks' whole units under root and returns them.
func pathOf(g *GroupTree, root Node, toks []int32) []Node {
	var path []Node
	parent := root
	for u := 0; (u+1)*g.Unit() <= len(toks); u++ {
		parent = g.Ensure(parent, toks[u*g.Unit():(u+1)*g.Unit()])
		path = append(path, parent)
	}
	return path
}

// vLLM's test_cache_blocks_multi_group, on the tree alone: blocks cached for two groups
// under the same prefixes are found per group, and a prefix with a block of one group
// only is not cached for the other.
func TestGroupTreeEntriesPerGroup(t *testing.T) {
	g := newTestTree(t, 10, 4, 2)
	toks := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	path := pathOf(g, RootNode, toks)
	require.Len(t, path, 3)
	for i := range 2 {
		require.NoError(t, g.Cache(blocks.ID(1+i), path[i], 0))
	}
	for i := range 3 {
		require.NoError(t, g.Cache(blocks.ID(4+i), path[i], 1))
	}
	require.Equal(t, []int{2, 3}, g.Stats().Cached)
	require.Equal(t, []blocks.ID{1, 2, 0}, []blocks.ID{g.First(path[0], 0), g.First(path[1], 0), g.First(path[2], 0)})
	require.Equal(t, []blocks.ID{4, 5, 6}, []blocks.ID{g.First(path[0], 1), g.First(path[1], 1), g.First(path[2], 1)})
	e, ok := g.Entry(5)
	require.True(t, ok)
	require.Equal(t, GroupEntry{Node: path[1], Group: 1, Tier: Device}, e)
	require.Equal(t, path[0], g.Parent(path[1]))
	require.NoError(t, g.CheckInvariants())
}

// A second block under a (node, group) that has one is a duplicate: kept behind the
// first, found after it is gone.
func TestGroupTreeDuplicates(t *testing.T) {
	g := newTestTree(t, 10, 4, 1)
	n := g.Ensure(RootNode, []int32{1, 2, 3, 4})
	require.NoError(t, g.Cache(3, n, 0))
	require.NoError(t, g.Cache(7, n, 0))
	require.Equal(t, uint64(1), g.Stats().Duplicates)
	require.Equal(t, blocks.ID(3), g.First(n, 0))
	require.Equal(t, blocks.ID(7), g.NextCached(3))
	require.NoError(t, g.Uncache(3))
	require.Equal(t, blocks.ID(7), g.First(n, 0))
	require.NoError(t, g.CheckInvariants())
}

// Evicting a window block from the middle of a chain leaves its node as a tombstone that
// keeps the later nodes reachable; the tombstone goes with its last descendant.
func TestGroupTreeTombstone(t *testing.T) {
	g := newTestTree(t, 10, 2, 2)
	path := pathOf(g, RootNode, []int32{1, 2, 3, 4, 5, 6})
	for i, n := range path {
		require.NoError(t, g.Cache(blocks.ID(1+i), n, 1))
	}
	require.NoError(t, g.Uncache(1))
	require.True(t, g.IsLive(path[0]), "a tombstone")
	require.Equal(t, path[0], g.Next(RootNode, []int32{1, 2}), "the tombstone")
	require.Equal(t, path[1], g.Next(path[0], []int32{3, 4}))
	require.NoError(t, g.CheckInvariants())
	require.NoError(t, g.Uncache(3)) // the leaf: its node goes, and the parent keeps block 2
	require.False(t, g.IsLive(path[2]))
	require.True(t, g.IsLive(path[0]))
	require.NoError(t, g.Uncache(2)) // the tombstone's last descendant
	require.Equal(t, 0, g.Stats().Nodes)
	require.Zero(t, g.Next(RootNode, []int32{1, 2}))
	require.NoError(t, g.CheckInvariants())
}

// A pin keeps a node without entries; namespaces are separate roots, freed when empty.
func TestGroupTreePinsAndNamespaces(t *testing.T) {
	g := newTestTree(t, 10, 2, 1)
	ns := Namespace{LoRA: "a", Salt: "s"}
	require.Equal(t, NoNode, g.Root(ns, false))
	r := g.Root(ns, true)
	require.True(t, g.IsRoot(r))
	n := g.Ensure(r, []int32{1, 2})
	g.Pin(n)
	require.Zero(t, g.Next(RootNode, []int32{1, 2}), "the zero namespace does not see it")
	require.Equal(t, n, g.Next(r, []int32{1, 2}))
	require.Equal(t, 1, g.Pins(n))
	require.NoError(t, g.CheckInvariants())
	g.Unpin(n)
	require.False(t, g.IsLive(n))
	require.Equal(t, NoNode, g.Root(ns, false), "the root goes with its last node")
	require.NoError(t, g.CheckInvariants())
}

func TestGroupTreeBadInputChangesNothing(t *testing.T) {
	for _, sz := range [][3]int{{1, 4, 1}, {10, 0, 1}, {10, 4, 0}, {10, 4, MaxGroups + 1}} {
		_, err := NewGroupTree(sz[0], sz[1], sz[2])
		require.ErrorIs(t, err, ErrInvalidArgument, "%v", sz)
	}
	g := newTestTree(t, 6, 2, 2)
	n := g.Ensure(RootNode, []int32{1, 2})
	require.NoError(t, g.Cache(1, n, 0))
	r := g.Root(Namespace{LoRA: "x"}, true)
	g.Pin(g.Ensure(r, []int32{1, 2})) // keeps the namespace's root
	for _, tc := range []struct {
		name string
		b    blocks.ID
		n    Node
		g    int
		want error
	}{
		{"the null block", 0, n, 0, ErrInvalidArgument},
		{"a block outside the pool", 6, n, 0, ErrInvalidArgument},
		{"a negative group", 2, n, -1, ErrInvalidArgument},
		{"a group out of range", 2, n, 2, ErrInvalidArgument},
		{"the root", 2, RootNode, 0, ErrInvalidArgument},
		{"a namespace root", 2, r, 0, ErrInvalidArgument},
		{"a node out of range", 2, 99, 0, ErrInvalidArgument},
		{"a cached block", 1, n, 1, ErrAlreadyCached},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := g.Stats()
			require.ErrorIs(t, g.Cache(tc.b, tc.n, tc.g), tc.want)
			require.Equal(t, before, g.Stats())
			require.NoError(t, g.CheckInvariants())
		})
	}
	require.ErrorIs(t, g.Uncache(2), ErrNotCached)
	require.ErrorIs(t, g.Uncache(-3), ErrNotCached)
	// A unit of the wrong length is no prefix: Ensure makes no node (a longer one would
	// overwrite the next node's tokens) and Next finds none.
	for _, toks := range [][]int32{nil, {1}, {1, 2, 3}} {
		before := g.Stats()
		require.Equal(t, NoNode, g.Ensure(RootNode, toks), "%v", toks)
		require.Equal(t, Node(0), g.Next(RootNode, toks), "%v", toks)
		require.Equal(t, before, g.Stats())
		require.NoError(t, g.CheckInvariants())
	}
	require.Equal(t, n, g.Next(RootNode, []int32{1, 2}))
	require.Equal(t, []int{1, 0}, g.Stats().Cached)
}

func TestGroupTreeAllocatesNothing(t *testing.T) {
	g := newTestTree(t, 64, 4, 2)
	toks := make([]int32, 64)
	for i := range toks {
		toks[i] = int32(i)
	}
	pathOf(g, RootNode, toks) // grow once
	var path []Node
	failed := 0 // a call that fails does less work: count failures, so the test cannot pass vacuously
	allocs := testing.AllocsPerRun(100, func() {
		path = path[:0]
		parent := RootNode
		for u := range 16 {
			parent = g.Ensure(parent, toks[u*4:(u+1)*4])
			path = append(path, parent)
		}
		for i, n := range path {
			if g.Cache(blocks.ID(1+i), n, i%2) != nil {
				failed++
			}
		}
		for i := range path {
			if g.Next(RootNode, toks[:4]) != path[0] {
				failed++
			}
			if g.Uncache(blocks.ID(1+i)) != nil {
				failed++
			}
		}
	})
	require.Zero(t, failed)
	require.Zero(t, allocs)
	require.Equal(t, []int{0, 0}, g.Stats().Cached)
	require.NoError(t, g.CheckInvariants())
}

func TestGroupTreeCheckInvariantsCatchesCorruption(t *testing.T) {
	for name, corrupt := range map[string]func(g *GroupTree, path []Node){
		"entry count":    func(g *GroupTree, path []Node) { g.nodes[path[0]].entries++ },
		"cached count":   func(g *GroupTree, path []Node) { g.res[Device].cached[0]-- },
		"list tail":      func(g *GroupTree, path []Node) { g.res[Device].tail[int(path[1])*g.ng] = 0 },
		"unlisted entry": func(g *GroupTree, path []Node) { g.res[Device].ent[5].node = path[0] },
		"children":       func(g *GroupTree, path []Node) { g.nodes[path[0]].children++ },
		"key":            func(g *GroupTree, path []Node) { g.nodes[path[1]].key++ },
		"hint":           func(g *GroupTree, path []Node) { g.nodes[path[1]].hint = path[0] },
		"live count":     func(g *GroupTree, path []Node) { g.live++ },
	} {
		t.Run(name, func(t *testing.T) {
			g := newTestTree(t, 8, 2, 1)
			path := pathOf(g, RootNode, []int32{1, 2, 3, 4})
			require.NoError(t, g.Cache(1, path[0], 0))
			require.NoError(t, g.Cache(2, path[1], 0))
			require.NoError(t, g.CheckInvariants())
			corrupt(g, path)
			require.Error(t, g.CheckInvariants())
		})
	}
}

// TestUnitKeyUnrolled holds the unrolled 16-token key to the general loop's value.
func TestUnitKeyUnrolled(t *testing.T) {
	toks := []int32{5, 127999, 0, 3, 77, 1 << 20, 9, 9, 12, 13, 14, 15, 16, 17, 18, 19}
	var sum uint64
	for i := 0; i+1 < 16; i += 2 {
		k := nhKeys[i/2]
		sum += (uint64(uint32(toks[i])) + k[0]) * (uint64(uint32(toks[i+1])) + k[1])
	}
	parent := uint64(42)
	h := sum ^ (parent * 0x9E3779B97F4A7C15) ^ 16
	h ^= h >> 33
	h *= 0xFF51AFD7ED558CCD
	h ^= h >> 33
	h *= 0xC4CEB9FE1A85EC53
	require.Equal(t, h^h>>33, unitKey(42, toks))
	require.NotEqual(t, unitKey(42, toks), unitKey(43, toks))
}

// TestGroupTreeStateMachine drives random ensures, caches, uncaches, pins and unpins,
// over two namespaces and a three-token alphabet (so prefixes collide often), against a
// reference model: a map from (namespace, prefix, group) to the blocks cached there in
// order, and a pin count per prefix. After every step the first block of every prefix and
// group, the counts and CheckInvariants agree; a node lives exactly while the model says
// something keeps it.
func TestGroupTreeStateMachine(t *testing.T) {
	const unit, groups, numBlocks = 2, 2, 16
	type key struct {
		ns     int
		prefix string
		group  int
	}
	rapid.Check(t, func(t *rapid.T) {
		g, err := NewGroupTree(numBlocks, unit, groups)
		require.NoError(t, err)
		nss := []Namespace{{}, {LoRA: "l"}}
		lists := map[key][]blocks.ID{}
		where := map[blocks.ID]key{}
		pins := map[[2]any]int{} // (ns, prefix) -> pins
		encode := func(toks []int32) string {
			return string(slices.Collect(func(y func(rune) bool) {
				for _, v := range toks {
					if !y(rune('a' + v)) {
						return
					}
				}
			}))
		}
		drawPrefix := func(t *rapid.T) (int, []int32) {
			ns := rapid.IntRange(0, 1).Draw(t, "ns")
			units := rapid.IntRange(1, 3).Draw(t, "units")
			return ns, rapid.SliceOfN(rapid.Int32Range(0, 2), units*unit, units*unit).Draw(t, "toks")
		}
		// node finds the prefix's node without creating anything, or 0.
		node := func(ns int, toks []int32) Node {
			n := g.Root(nss[ns], false)
			if n == NoNode {
				return 0
			}
			for u := 0; u < len(toks)/unit; u++ {
				if n = g.Next(n, toks[u*unit:(u+1)*unit]); n == 0 {
					return 0
				}
			}
			return n
		}
		ensure := func(ns int, toks []int32) Node {
			return pathOf(g, g.Root(nss[ns], true), toks)[len(toks)/unit-1]
		}
		// kept reports whether the model keeps (ns, p): an entry or a pin at or below it.
		kept := func(ns int, p string) bool {
			for k, l := range lists {
				if k.ns == ns && len(l) > 0 && len(k.prefix) >= len(p) && k.prefix[:len(p)] == p {
					return true
				}
			}
			for k, c := range pins {
				q := k[1].(string)
				if k[0].(int) == ns && c > 0 && len(q) >= len(p) && q[:len(p)] == p {
					return true
				}
			}
			return false
		}
		t.Repeat(map[string]func(*rapid.T){
			"cache": func(t *rapid.T) {
				ns, toks := drawPrefix(t)
				b := blocks.ID(rapid.IntRange(1, numBlocks-1).Draw(t, "block"))
				grp := rapid.IntRange(0, groups-1).Draw(t, "group")
				n := ensure(ns, toks)
				err := g.Cache(b, n, grp)
				if _, cached := where[b]; cached {
					require.ErrorIs(t, err, ErrAlreadyCached)
					g.maybeFree(n) // the node ensure made, which nothing keeps
					return
				}
				require.NoError(t, err)
				k := key{ns, encode(toks), grp}
				lists[k] = append(lists[k], b)
				where[b] = k
			},
			"uncache": func(t *rapid.T) {
				b := blocks.ID(rapid.IntRange(0, numBlocks).Draw(t, "block"))
				err := g.Uncache(b)
				k, cached := where[b]
				if !cached {
					require.ErrorIs(t, err, ErrNotCached)
					return
				}
				require.NoError(t, err)
				lists[k] = slices.DeleteFunc(lists[k], func(x blocks.ID) bool { return x == b })
				delete(where, b)
			},
			"pin": func(t *rapid.T) {
				ns, toks := drawPrefix(t)
				g.Pin(ensure(ns, toks))
				pins[[2]any{ns, encode(toks)}]++
			},
			"unpin": func(t *rapid.T) {
				var held [][2]any
				for k, c := range pins {
					if c > 0 {
						held = append(held, k)
					}
				}
				if len(held) == 0 {
					t.Skip("nothing pinned")
				}
				slices.SortFunc(held, func(a, b [2]any) int {
					if a[0].(int) != b[0].(int) {
						return a[0].(int) - b[0].(int)
					}
					return compareStrings(a[1].(string), b[1].(string))
				})
				k := rapid.SampledFrom(held).Draw(t, "pinned")
				toks := make([]int32, len(k[1].(string)))
				for i, r := range k[1].(string) {
					toks[i] = int32(r - 'a')
				}
				g.Unpin(node(k[0].(int), toks))
				pins[k]--
			},
			"": func(t *rapid.T) {
				require.NoError(t, g.CheckInvariants())
				cached := make([]int, groups)
				for k, l := range lists {
					cached[k.group] += len(l)
					toks := make([]int32, len(k.prefix))
					for i, r := range k.prefix {
						toks[i] = int32(r - 'a')
					}
					n := node(k.ns, toks)
					if len(l) == 0 {
						if n != 0 {
							require.Equal(t, blocks.NullID, g.First(n, k.group))
						}
						continue
					}
					require.NotZero(t, n, "%+v is cached", k)
					require.Equal(t, l[0], g.First(n, k.group), "%+v", k)
					for i := 1; i < len(l); i++ {
						require.Equal(t, l[i], g.NextCached(l[i-1]))
					}
				}
				require.Equal(t, cached, g.Stats().Cached)
				for n := range g.Nodes() {
					if g.IsRoot(n) {
						continue
					}
					ns, p := 0, []int32(nil)
					m := n
					for ; !g.IsRoot(m); m = g.Parent(m) {
						p = append(slices.Clone(g.tokens(m)), p...)
					}
					if m != RootNode {
						ns = 1
					}
					require.True(t, kept(ns, encode(p)), "node %d (%v) lives with nothing keeping it", n, p)
				}
			},
		})
	})
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// CacheChain is Cache block by block along a path, k units a block, and all or nothing.
func TestGroupTreeCacheChain(t *testing.T) {
	g := newTestTree(t, 12, 2, 2)
	path := pathOf(g, RootNode, []int32{1, 2, 3, 4, 5, 6, 7, 8})
	require.NoError(t, g.CacheChain(1, []blocks.ID{3, blocks.NullID}, path, 2))
	require.Equal(t, blocks.ID(3), g.First(path[1], 1), "a two-unit block at its last unit")
	require.Equal(t, blocks.NullID, g.First(path[3], 1))
	require.NoError(t, g.CacheChain(0, []blocks.ID{5, 6}, path[2:], 1))
	require.Equal(t, []blocks.ID{5, 6}, []blocks.ID{g.First(path[2], 0), g.First(path[3], 0)})

	before := g.Stats()
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"a block twice", func() error { return g.CacheChain(0, []blocks.ID{7, 7}, path, 1) }, ErrAlreadyCached},
		{"a cached block", func() error { return g.CacheChain(0, []blocks.ID{8, 9, 3}, path, 1) }, ErrAlreadyCached},
		{"the path short", func() error { return g.CacheChain(0, []blocks.ID{7, 8, 9}, path, 2) }, ErrInvalidArgument},
		{"a bad group", func() error { return g.CacheChain(2, []blocks.ID{7}, path, 1) }, ErrInvalidArgument},
		{"an unknown block", func() error { return g.CacheChain(0, []blocks.ID{7, 12}, path, 1) }, ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.call(), tc.want)
			require.Equal(t, before, g.Stats())
			for _, b := range []blocks.ID{7, 8, 9} {
				require.False(t, g.IsCached(b))
			}
			require.NoError(t, g.CheckInvariants())
		})
	}
}
