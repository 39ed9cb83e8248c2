package cluster_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// storeChain makes the Batch that a server caching p's full blocks [from, to) would send,
// with the vLLM hasher of seed.
func storeChain(t testingT, seed string, p *prefix.Prompt, bs, from, to int, opts ...kvevents.Option) *kvevents.Batch {
	t.Helper()
	hs := vllmhash.PromptHashes(vllmhash.NewSHA256CBOR(seed), p, bs)
	e := &prefix.BlockStored{HashSize: 32, BlockSize: bs, Namespace: p.Namespace, Tokens: p.Tokens[from*bs : to*bs]}
	for i := from; i < to; i++ {
		e.Hashes = append(e.Hashes, hs[i]...)
		e.Blocks = append(e.Blocks, blocks.ID(i))
	}
	if from > 0 {
		e.Parent = hs[from-1]
	}
	b := newBatcher(t, opts...)
	b.BlockStored(e)
	return decode(t, b.AppendBatch(nil, 1))
}

func removeBlocks(t testingT, hashes ...[]byte) *kvevents.Batch {
	return removeBlocksIn(t, nil, hashes...)
}

// removeBlocksIn is removeBlocks with the Batcher's options (WithGroup).
func removeBlocksIn(t testingT, opts []kvevents.Option, hashes ...[]byte) *kvevents.Batch {
	e := &prefix.BlockRemoved{HashSize: 32}
	for i, h := range hashes {
		e.Hashes = append(e.Hashes, h...)
		e.Blocks = append(e.Blocks, blocks.ID(i))
	}
	b := newBatcher(t, opts...)
	b.BlockRemoved(e)
	return decode(t, b.AppendBatch(nil, 1))
}

func decode(t testingT, payload []byte) *kvevents.Batch {
	t.Helper()
	b, err := kvevents.DecodeBatch(payload)
	require.NoError(t, err)
	return b
}

// testingT is what the helpers need of a test: *testing.T, *testing.B or *rapid.T.
type testingT interface {
	require.TestingT
	Helper()
}

func prompt(ns prefix.Namespace, from, n int32) *prefix.Prompt {
	return &prefix.Prompt{Namespace: ns, Tokens: seqTokens(from, from+n)}
}

func TestClusterRoutesToTheLongestPrefix(t *testing.T) {
	c := newIndex(t, "42", 4)
	p := prompt(prefix.Namespace{}, 0, 32) // 8 blocks
	require.NoError(t, c.Apply("b", storeChain(t, "42", p, 4, 0, 3)))
	require.NoError(t, c.Apply("a", storeChain(t, "42", p, 4, 0, 5)))
	require.NoError(t, c.Apply("c", storeChain(t, "42", prompt(prefix.Namespace{}, 100, 16), 4, 0, 4)))

	srv, n, ok := c.Route(p)
	require.True(t, ok)
	require.Equal(t, "a", srv)
	require.Equal(t, 5, n)
	require.Equal(t, []cluster.ServerHit{{"a", 5}, {"b", 3}, {"c", 0}}, match(t, c, p))

	// Ties go to the first name.
	require.NoError(t, c.Apply("b", storeChain(t, "42", p, 4, 3, 5)))
	srv, _, _ = c.Route(p)
	require.Equal(t, "a", srv)

	// Eviction: the index follows.
	hs := vllmhash.PromptHashes(vllmhash.NewSHA256CBOR("42"), p, 4)
	require.NoError(t, c.Apply("a", removeBlocks(t, hs[4], hs[3], hs[2])))
	srv, n, _ = c.Route(p)
	require.Equal(t, "b", srv)
	require.Equal(t, 5, n)
	require.Equal(t, 2, c.Stats("a").Blocks)

	_, _, ok = c.Route(prompt(prefix.Namespace{}, 5000, 16))
	require.False(t, ok, "nobody holds it")
	_, _, ok = c.Route(prompt(prefix.Namespace{}, 0, 3))
	require.False(t, ok, "no full block")
}

func TestClusterNamespacesDoNotMix(t *testing.T) {
	c := newIndex(t, "42", 4)
	salted := prompt(prefix.Namespace{Salt: "tenant-a"}, 0, 16)
	lora := prompt(prefix.Namespace{LoRA: "ad"}, 0, 16)
	require.NoError(t, c.Apply("s", storeChain(t, "42", salted, 4, 0, 4)))
	require.NoError(t, c.Apply("l", storeChain(t, "42", lora, 4, 0, 4)))
	for _, tc := range []struct {
		p    *prefix.Prompt
		want string
	}{{salted, "s"}, {lora, "l"}} {
		srv, n, ok := c.Route(tc.p)
		require.True(t, ok)
		require.Equal(t, tc.want, srv)
		require.Equal(t, 4, n)
	}
	_, _, ok := c.Route(prompt(prefix.Namespace{}, 0, 16))
	require.False(t, ok, "the plain prompt hashes differently from both")
}

// A BlockStored whose parent was never seen is kept, not dropped; the chain becomes
// reachable once the missing blocks arrive.
func TestClusterKeepsOrphanChains(t *testing.T) {
	c := newIndex(t, "42", 4)
	p := prompt(prefix.Namespace{}, 0, 24)
	require.NoError(t, c.Apply("a", storeChain(t, "42", p, 4, 3, 6))) // blocks 3..5, parent 2 unknown
	require.EqualValues(t, 1, c.Stats("a").Orphans)
	require.Equal(t, 3, c.Stats("a").Blocks)
	_, _, ok := c.Route(p)
	require.False(t, ok, "not reachable through the missing prefix")

	require.NoError(t, c.Apply("a", storeChain(t, "42", p, 4, 0, 3))) // the missing prefix arrives (a replay)
	srv, n, ok := c.Route(p)
	require.True(t, ok)
	require.Equal(t, "a", srv)
	require.Equal(t, 6, n, "the orphan chain below it counts at once")
}

func TestClusterDetectsDisagreement(t *testing.T) {
	c := newIndex(t, "42", 4)
	salted := prompt(prefix.Namespace{Salt: "x", LoRA: "l"}, 0, 16)
	require.NoError(t, c.Apply("ok", storeChain(t, "42", salted, 4, 0, 4)))
	require.NoError(t, c.Apply("seed", storeChain(t, "43", salted, 4, 0, 4)))
	require.NoError(t, c.Apply("bs", storeChain(t, "42", prompt(prefix.Namespace{}, 0, 16), 8, 0, 2)))
	require.Zero(t, c.Stats("ok").RootMismatches)
	require.EqualValues(t, 1, c.Stats("seed").RootMismatches, "another PYTHONHASHSEED")
	require.EqualValues(t, 1, c.Stats("bs").BlockSizeMismatches)
	require.NoError(t, c.Apply("ok", removeBlocks(t, make([]byte, 32))))
	require.EqualValues(t, 1, c.Stats("ok").UnknownRemovals)
	require.Equal(t, []string{"bs", "ok", "seed"}, c.Servers())
}

func TestClusterClear(t *testing.T) {
	c := newIndex(t, "42", 4)
	p := prompt(prefix.Namespace{}, 0, 16)
	require.NoError(t, c.Apply("a", storeChain(t, "42", p, 4, 0, 4)))
	b := newBatcher(t)
	b.AllBlocksCleared()
	require.NoError(t, c.Apply("a", decode(t, b.AppendBatch(nil, 1))))
	require.Zero(t, c.Stats("a").Blocks)
	require.EqualValues(t, 1, c.Stats("a").Cleared)
}

func TestClusterMatchDoesNotAllocate(t *testing.T) {
	if invariant.Enabled {
		t.Skip("allocation counts are meaningless with invariant checks on")
	}
	c := newIndex(t, "42", 16)
	p := prompt(prefix.Namespace{Salt: "s"}, 0, 1024)
	p.MM = []prefix.MMInput{{Hash: "img", Offset: 20, Length: 40}}
	require.NoError(t, c.Apply("a", storeChain(t, "42", p, 16, 0, 64)))
	require.NoError(t, c.Apply("b", storeChain(t, "42", p, 16, 0, 10)))
	hits := make([]cluster.ServerHit, 0, 4)
	allocs := testing.AllocsPerRun(50, func() { hits, _ = c.Match(hits[:0], p) })
	require.Zero(t, allocs)
	require.Equal(t, 64, hits[0].Blocks)
}

func newIndex(t testingT, seed string, bs int) *cluster.ClusterIndex {
	t.Helper()
	c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR(seed), bs)
	require.NoError(t, err)
	return c
}

func match(t testingT, c cluster.Index, p *prefix.Prompt) []cluster.ServerHit {
	t.Helper()
	hits, err := c.Match(nil, p)
	require.NoError(t, err)
	return hits
}

func seqTokens(from, to int32) []int32 {
	out := make([]int32, 0, to-from)
	for v := from; v < to; v++ {
		out = append(out, v)
	}
	return out
}

// A hybrid server's sliding-window group drops a block the full-attention group still
// holds: the block stays routable until every group has dropped it.
func TestClusterKeepsABlockWhileAGroupHoldsIt(t *testing.T) {
	c := newIndex(t, "42", 4)
	p := prompt(prefix.Namespace{}, 0, 16)
	full, window := []kvevents.Option{kvevents.WithGroup(0)}, []kvevents.Option{kvevents.WithGroup(1)}
	require.NoError(t, c.Apply("h", storeChain(t, "42", p, 4, 0, 4, full...)))
	require.NoError(t, c.Apply("h", storeChain(t, "42", p, 4, 0, 4, window...)))
	hs := vllmhash.PromptHashes(vllmhash.NewSHA256CBOR("42"), p, 4)
	require.NoError(t, c.Apply("h", removeBlocksIn(t, window, hs[0], hs[1])))
	require.Equal(t, []cluster.ServerHit{{Server: "h", Blocks: 4}}, match(t, c, p))
	require.NoError(t, c.Apply("h", removeBlocksIn(t, full, hs[1])))
	require.Equal(t, []cluster.ServerHit{{Server: "h", Blocks: 1}}, match(t, c, p))
	require.NoError(t, c.Apply("h", removeBlocksIn(t, nil, hs[0])))
	require.Equal(t, uint64(1), c.Stats("h").UnknownRemovals, "no group is not group 0")
	require.NoError(t, c.CheckInvariants())

	require.NoError(t, c.Apply("g", storeChain(t, "42", p, 4, 0, 4, kvevents.WithGroup(63))))
	st := c.Stats("g")
	require.Equal(t, uint64(4), st.Refused)
	require.Zero(t, st.Blocks)
}

// newBatcher is kvevents.NewBatcher, failing the test on an error.
func newBatcher(t require.TestingT, opts ...kvevents.Option) *kvevents.Batcher {
	b, err := kvevents.NewBatcher(opts...)
	require.NoError(t, err)
	return b
}
