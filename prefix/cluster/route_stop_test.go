package cluster_test

import (
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// countingHasher is vLLM's hasher counting the blocks it hashes; once stopAt is reached
// (1-based, 0 for never) it signals inBlock and waits for release.
type countingHasher struct {
	*vllmhash.SHA256CBOR
	blocks  atomic.Int64
	stopAt  int64
	inBlock chan struct{}
	release chan struct{}
}

func (h *countingHasher) Block(dst, parent []byte, tokens []int32, e prefix.Extra) {
	if n := h.blocks.Add(1); n == h.stopAt {
		close(h.inBlock)
		<-h.release
	}
	h.SHA256CBOR.Block(dst, parent, tokens, e)
}

// referenceHits is each server's number of leading blocks of p as a walk of every block
// of the prompt finds it (the lookup before it stopped early), by name.
func referenceHits(c *cluster.ClusterIndex, p *prefix.Prompt, bs int) []cluster.ServerHit {
	hs := vllmhash.PromptHashes(vllmhash.NewSHA256CBOR("42"), p, bs)
	var out []cluster.ServerHit
	for _, s := range c.Servers() {
		n := 0
		for n < len(hs) && c.Holds(s, hs[n]) {
			n++
		}
		out = append(out, cluster.ServerHit{Server: s, Blocks: n})
	}
	slices.SortStableFunc(out, func(a, b cluster.ServerHit) int { return b.Blocks - a.Blocks })
	return out
}

// A lookup stops hashing at the first block no server holds, and finds what walking the
// whole prompt finds: the same hits, the same route. It hashes at most about three times
// the longest held prefix (its runs double), never the whole of a long prompt.
func TestLookupStopsAtTheFirstBlockNoServerHolds(t *testing.T) {
	const bs, blocks = 4, 600
	p := prompt(prefix.Namespace{Salt: "s"}, 0, bs*blocks)
	other := prompt(prefix.Namespace{}, 100_000, bs*8)
	for _, tc := range []struct {
		name string
		held map[string][2]int // server: blocks [from, to) of p it stores
	}{
		{"no server", nil},
		{"a server holding another prompt", map[string][2]int{"a": {-1, -1}}},
		{"first block only", map[string][2]int{"a": {0, 1}}},
		{"the first run", map[string][2]int{"a": {0, 4}}},
		{"into the second run", map[string][2]int{"a": {0, 5}, "b": {0, 2}}},
		{"a hole after 10", map[string][2]int{"a": {0, 10}, "b": {11, 40}}},
		{"an orphaned tail", map[string][2]int{"a": {3, 600}}},
		{"300 blocks", map[string][2]int{"a": {0, 300}, "b": {0, 299}, "c": {0, 7}}},
		{"every block", map[string][2]int{"a": {0, 600}, "b": {0, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &countingHasher{SHA256CBOR: vllmhash.NewSHA256CBOR("42")}
			c, err := cluster.NewClusterIndex(h, bs)
			require.NoError(t, err)
			for s, r := range tc.held {
				if r[0] < 0 {
					require.NoError(t, c.Apply(s, storeChain(t, "42", other, bs, 0, 8)))
					continue
				}
				require.NoError(t, c.Apply(s, storeChain(t, "42", p, bs, r[0], r[1])))
			}
			want := referenceHits(c, p, bs)
			h.blocks.Store(0)
			got, err := c.Match(nil, p)
			require.NoError(t, err)
			require.Equal(t, want, got)
			best := 0
			if len(want) > 0 {
				best = want[0].Blocks
			}
			hashed := int(h.blocks.Load())
			require.LessOrEqual(t, hashed, min(blocks, max(4, 3*best), best+256), "hashed %d blocks for a longest prefix of %d", hashed, best)

			srv, n, ok := c.Route(p)
			require.Equal(t, best > 0, ok)
			require.Equal(t, best, n)
			if ok {
				require.Equal(t, want[0].Server, srv)
			}
		})
	}
}

// The same for any servers' holdings (each a run of p's blocks, some with holes), through
// the Router too.
func TestLookupStopsEarlyFindsWhatAFullWalkFinds(t *testing.T) {
	const bs = 2
	rapid.Check(t, func(rt *rapid.T) {
		blocks := rapid.IntRange(0, 80).Draw(rt, "blocks")
		p := prompt(prefix.Namespace{}, 0, int32(bs*blocks+rapid.IntRange(0, bs-1).Draw(rt, "tail")))
		c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), bs)
		require.NoError(rt, err)
		servers := rapid.IntRange(0, 4).Draw(rt, "servers")
		names := []string{}
		for i := range servers {
			name := string(rune('a' + i))
			names = append(names, name)
			c.AddServer(name)
			if blocks == 0 {
				continue
			}
			from := rapid.IntRange(0, blocks-1).Draw(rt, "from")
			to := rapid.IntRange(from+1, blocks).Draw(rt, "to")
			require.NoError(rt, c.Apply(name, storeChain(rt, "42", p, bs, from, to)))
		}
		want := referenceHits(c, p, bs)
		got, err := c.Match(nil, p)
		require.NoError(rt, err)
		require.Equal(rt, want, got)
		if servers == 0 {
			return
		}
		r := cluster.Router{Index: c, Policy: cluster.PrefixAware{}}
		d, err := r.Route(p, names, make([]float64, len(names)))
		require.NoError(rt, err)
		require.Equal(rt, want[0].Blocks, d.Best)
		require.Equal(rt, want[0].Blocks, d.Cached)
	})
}

// When an Apply changes the index between two of a lookup's runs, the lookup walks again
// from the first block: its hits are those of one moment. Here c holds 64 blocks when the
// lookup starts; stopped in its second run, c loses block 2 and a new server b (sorted
// before c) stores all 64. The lookup sees c with 2 blocks and b with 64 (walking on from
// its first run, it would count c's blocks on from 4, through b's index).
func TestLookupWalksAgainAfterAnApply(t *testing.T) {
	const bs = 4
	p := prompt(prefix.Namespace{}, 0, bs*64)
	hs := vllmhash.PromptHashes(vllmhash.NewSHA256CBOR("42"), p, bs)
	h := &countingHasher{SHA256CBOR: vllmhash.NewSHA256CBOR("42"), inBlock: make(chan struct{}), release: make(chan struct{})}
	c, err := cluster.NewClusterIndex(h, bs)
	require.NoError(t, err)
	require.NoError(t, c.Apply("c", storeChain(t, "42", p, bs, 0, 64)))
	h.blocks.Store(0)
	h.stopAt = 6 // the second run's second block
	done := make(chan []cluster.ServerHit)
	go func() {
		got, _ := c.Match(nil, p)
		done <- got
	}()
	<-h.inBlock
	require.NoError(t, c.Apply("c", removeBlocks(t, hs[2])))
	require.NoError(t, c.Apply("b", storeChain(t, "42", p, bs, 0, 64)))
	close(h.release)
	got := <-done
	require.Equal(t, []cluster.ServerHit{{Server: "b", Blocks: 64}, {Server: "c", Blocks: 2}}, got)
	require.Equal(t, referenceHits(c, p, bs), got)
}
