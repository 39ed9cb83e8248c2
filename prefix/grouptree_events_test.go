package prefix

import (
	"bytes"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// groupLog keeps a GroupTree's events as (kind, group, blocks, tokens, parent, hashes).
type groupLog struct{ events []groupEvent }

type groupEvent struct {
	kind           string
	group          int
	blocks         []blocks.ID
	tokens         []int32
	bs             int
	parent, hashes []byte
	ns             Namespace
}

func (l *groupLog) BlockStored(e *BlockStored) {
	l.events = append(l.events, groupEvent{"stored", e.Group, append([]blocks.ID(nil), e.Blocks...),
		append([]int32(nil), e.Tokens...), e.BlockSize, bytes.Clone(e.Parent), bytes.Clone(e.Hashes), e.Namespace})
}

func (l *groupLog) BlockRemoved(e *BlockRemoved) {
	l.events = append(l.events, groupEvent{kind: "removed", group: e.Group, blocks: append([]blocks.ID(nil), e.Blocks...), hashes: bytes.Clone(e.Hashes)})
}

func (l *groupLog) AllBlocksCleared() { l.events = append(l.events, groupEvent{kind: "cleared"}) }

// fast64Chain is what an Index with Fast64 hashes for toks in blocks of bs under ns.
func fast64Chain(toks []int32, bs int, ns Namespace) []byte {
	prev := make([]byte, 8)
	Fast64{}.Root(prev)
	var out []byte
	for i := 0; (i+1)*bs <= len(toks); i++ {
		x := Extra{LoRA: ns.LoRA}
		if i == 0 {
			x.Salt = ns.Salt
		}
		cur := make([]byte, 8)
		Fast64{}.Block(cur, prev, toks[i*bs:(i+1)*bs], x)
		out, prev = append(out, cur...), cur
	}
	return out
}

// Events name their group, come once per (prefix, group) whatever the duplicates, chain a
// two-unit group's blocks by the node two units up, and hash one-unit blocks as an Index
// does, namespace included.
func TestGroupTreeEvents(t *testing.T) {
	g := newTestTree(t, 16, 2, 2)
	log := &groupLog{}
	require.NoError(t, g.SetObserver(log, nil, []int{1, 2}))
	ns := Namespace{LoRA: "a", Salt: "s"}
	toks := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	path := pathOf(g, g.Root(ns, true), toks)
	chain := fast64Chain(toks, 2, ns)

	require.NoError(t, g.CacheChain(0, []blocks.ID{1, 2, blocks.NullID, 3}, path, 1))
	require.NoError(t, g.CacheChain(1, []blocks.ID{5, 6}, path, 2))
	require.NoError(t, g.Cache(7, path[0], 0)) // a duplicate: no event
	require.NoError(t, g.Uncache(1))           // the duplicate remains: no event
	require.NoError(t, g.Uncache(6))
	require.Equal(t, []groupEvent{
		{"stored", 0, []blocks.ID{1, 2}, toks[:4], 2, nil, chain[:16], ns},
		{"stored", 0, []blocks.ID{3}, toks[6:8], 2, chain[16:24], chain[24:32], ns},
		{"stored", 1, []blocks.ID{5, 6}, toks, 4, nil, append(bytes.Clone(chain[8:16]), chain[24:32]...), ns},
		{kind: "removed", group: 1, blocks: []blocks.ID{6}, hashes: chain[24:32]},
	}, log.events)
	require.Equal(t, []int{3, 1}, g.Stats().Prefixes)
	require.NoError(t, g.CheckInvariants())

	g.Pin(path[3])
	require.ErrorIs(t, g.Clear(), ErrBlocksHeld)
	g.Unpin(path[3])
	require.NoError(t, g.Clear())
	require.Equal(t, "cleared", log.events[len(log.events)-1].kind)
	require.Equal(t, 0, g.Stats().Nodes)
	require.NoError(t, g.CheckInvariants())

	require.Error(t, g.SetObserver(log, nil, []int{1}), "one size per group")
	g.Ensure(RootNode, toks[:2])
	require.ErrorIs(t, g.SetObserver(log, nil, []int{1, 2}), ErrInvalidArgument, "after the first node")
	require.ErrorIs(t, g.CacheChain(1, []blocks.ID{9}, path, 1), ErrInvalidArgument, "k disagrees with the group's")
}

// With events on, caching and evicting a chain allocate nothing once the scratch is warm.
func TestGroupTreeEventsAllocateNothing(t *testing.T) {
	g := newTestTree(t, 64, 4, 2)
	require.NoError(t, g.SetObserver(nopObserver{}, nil, []int{1, 1}))
	toks := make([]int32, 64)
	for i := range toks {
		toks[i] = int32(i)
	}
	path := pathOf(g, RootNode, toks)
	ids := make([]blocks.ID, 16)
	for i := range ids {
		ids[i] = blocks.ID(1 + i)
	}
	g.Pin(path[len(path)-1])
	failed := 0 // counted, so that a call failing early cannot make the test pass vacuously
	run := func() {
		if g.CacheChain(0, ids, path, 1) != nil {
			failed++
		}
		for _, b := range ids {
			if g.Uncache(b) != nil {
				failed++
			}
		}
	}
	run()
	require.Zero(t, testing.AllocsPerRun(50, run))
	require.Zero(t, failed)
	require.NoError(t, g.CheckInvariants())
}

// With events on, a chain stored into the host and loaded back (its events batched)
// allocates nothing once the scratch is warm.
func TestGroupTreeTierEventsAllocateNothing(t *testing.T) {
	g := newTestTree(t, 64, 4, 2)
	require.NoError(t, g.SetObserver(nopObserver{}, nil, []int{1, 2}))
	require.NoError(t, g.SetTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 32}}, BlockBytes: 64}))
	toks := make([]int32, 64)
	for i := range toks {
		toks[i] = int32(i)
	}
	path := pathOf(g, RootNode, toks)
	g.Pin(path[len(path)-1])
	ids0, ids1 := make([]blocks.ID, 16), make([]blocks.ID, 8)
	for i := range ids0 {
		ids0[i] = blocks.ID(1 + 2*i) // the groups' blocks interleave: the plan's copies are not in chain order
	}
	for i := range ids1 {
		ids1[i] = blocks.ID(2 + 2*i)
	}
	var plans []Plan
	var dev []blocks.ID
	lds := make([]GroupLoad, 0, 24)
	all := make([]blocks.ID, 0, 24)
	failed := 0
	run := func() {
		if g.CacheChain(0, ids0, path, 1) != nil || g.CacheChain(1, ids1, path, 2) != nil {
			failed++
		}
		all = append(append(all[:0], ids0...), ids1...)
		for _, b := range all {
			if !g.PrepareStore(b) {
				failed++
			}
		}
		plans = g.TakePlans(plans[:0])
		for _, p := range plans {
			var err error
			if _, dev, err = g.CompleteTransfer(p.ID, true, dev[:0]); err != nil {
				failed++
			}
		}
		lds = lds[:0]
		for _, b := range all {
			e, _ := g.Entry(b)
			lds = append(lds, GroupLoad{Node: e.Node, Group: e.Group, Dst: b + 32})
			if g.Uncache(b) != nil {
				failed++
			}
		}
		id, err := g.PrepareLoad(lds)
		if err != nil {
			failed++
		}
		plans = g.TakePlans(plans[:0])
		if _, dev, err = g.CompleteTransfer(id, false, dev[:0]); err != nil { // the keys leave the host
			failed++
		}
	}
	run()
	require.Zero(t, failed)
	require.Zero(t, testing.AllocsPerRun(20, run))
	require.Zero(t, failed)
	require.NoError(t, g.CheckInvariants())
}

// EventHash names a node as its events do: it appends a copy of the hash of each unit's
// node in the chain, and none for a root, a node not live, or a tree with no observer.
func TestGroupTreeEventHash(t *testing.T) {
	g := newTestTree(t, 16, 2, 1)
	require.NoError(t, g.SetObserver(&groupLog{}, nil, []int{1}))
	ns := Namespace{LoRA: "a", Salt: "s"}
	toks := []int32{1, 2, 3, 4, 5, 6}
	root := g.Root(ns, true)
	path := pathOf(g, root, toks)
	chain := fast64Chain(toks, 2, ns)
	for i, n := range path {
		h, ok := g.EventHash([]byte{0xaa}, n)
		require.True(t, ok, "unit %d", i)
		require.Equal(t, append([]byte{0xaa}, chain[i*8:(i+1)*8]...), h, "unit %d: appended to dst", i)
		h[1] ^= 0xff // a copy: changing it changes nothing of the tree's
		again, _ := g.EventHash(nil, n)
		require.Equal(t, chain[i*8:(i+1)*8], again, "unit %d: the tree's hash is unchanged", i)
	}
	requireNoHash(t, g, root)
	requireNoHash(t, g, RootNode)
	requireNoHash(t, g, Node(1000))
	requireNoHash(t, g, NoNode)

	plain := newTestTree(t, 16, 2, 1)
	requireNoHash(t, plain, pathOf(plain, RootNode, toks)[0]) // no observer, no hashes
}

func requireNoHash(t *testing.T, g *GroupTree, n Node) {
	t.Helper()
	h, ok := g.EventHash([]byte{1}, n)
	require.False(t, ok)
	require.Equal(t, []byte{1}, h, "dst unchanged")
}
