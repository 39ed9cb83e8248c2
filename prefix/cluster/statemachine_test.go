package cluster_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// The cluster index against a model: per server, the block hashes it holds, each with the
// set of KV-cache groups holding it (the groupless one apart); a server's hit for a
// prompt is the number of the prompt's leading blocks some group holds.
func TestClusterIndexStateMachine(t *testing.T) {
	const bs = 2
	// Prompts that share prefixes of different lengths, in two namespaces.
	base := seqTokens(0, 12)
	prompts := []*prefix.Prompt{
		{Tokens: base},
		{Tokens: append(slices.Clone(base[:6]), 90, 91, 92, 93, 94, 95)},
		{Tokens: append(slices.Clone(base[:2]), seqTokens(50, 60)...)},
		{Tokens: base, Namespace: prefix.Namespace{Salt: "t"}},
	}
	h := vllmhash.NewSHA256CBOR("s")
	hashes := make([][][]byte, len(prompts))
	for i, p := range prompts {
		hashes[i] = vllmhash.PromptHashes(h, p, bs)
	}
	servers := []string{"a", "b", "c"}

	rapid.Check(t, func(rt *rapid.T) {
		c := newIndex(rt, "s", bs)
		model := map[string]map[uint64]map[int]bool{}
		groupOpts := func(rt *rapid.T) (int, []kvevents.Option) {
			g := rapid.IntRange(-1, 2).Draw(rt, "group") // -1: no group_idx
			if g < 0 {
				return g, nil
			}
			return g, []kvevents.Option{kvevents.WithGroup(g)}
		}
		for _, s := range servers {
			model[s] = map[uint64]map[int]bool{}
			c.AddServer(s)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"store": func(rt *rapid.T) {
				s := rapid.SampledFrom(servers).Draw(rt, "server")
				pi := rapid.IntRange(0, len(prompts)-1).Draw(rt, "prompt")
				n := len(hashes[pi])
				from := rapid.IntRange(0, n-1).Draw(rt, "from")
				to := rapid.IntRange(from+1, n).Draw(rt, "to")
				g, opts := groupOpts(rt)
				require.NoError(rt, c.Apply(s, storeChain(rt, "s", prompts[pi], bs, from, to, opts...)))
				for _, x := range hashes[pi][from:to] {
					k := vllmhash.Uint64(x)
					if model[s][k] == nil {
						model[s][k] = map[int]bool{}
					}
					model[s][k][g] = true
				}
			},
			"remove": func(rt *rapid.T) {
				s := rapid.SampledFrom(servers).Draw(rt, "server")
				pi := rapid.IntRange(0, len(prompts)-1).Draw(rt, "prompt")
				idx := rapid.SliceOfNDistinct(rapid.IntRange(0, len(hashes[pi])-1), 1, 3, rapid.ID[int]).Draw(rt, "blocks")
				g, opts := groupOpts(rt)
				var hs [][]byte
				for _, i := range idx {
					hs = append(hs, hashes[pi][i])
					k := vllmhash.Uint64(hashes[pi][i])
					delete(model[s][k], g)
					if len(model[s][k]) == 0 {
						delete(model[s], k)
					}
				}
				require.NoError(rt, c.Apply(s, removeBlocksIn(rt, opts, hs...)))
			},
			"clear": func(rt *rapid.T) {
				s := rapid.SampledFrom(servers).Draw(rt, "server")
				b := newBatcher(rt)
				b.AllBlocksCleared()
				require.NoError(rt, c.Apply(s, decode(rt, b.AppendBatch(nil, 1))))
				clear(model[s])
			},
			"": func(rt *rapid.T) {
				require.NoError(rt, c.CheckInvariants())
				for i, p := range prompts {
					var want []cluster.ServerHit
					for _, s := range servers {
						n := 0
						for n < len(hashes[i]) && model[s][vllmhash.Uint64(hashes[i][n])] != nil {
							n++
						}
						want = append(want, cluster.ServerHit{Server: s, Blocks: n})
					}
					slices.SortStableFunc(want, func(a, b cluster.ServerHit) int { return b.Blocks - a.Blocks })
					require.Equal(rt, want, match(rt, c, p), "prompt %d", i)
					srv, n, ok := c.Route(p)
					require.Equal(rt, want[0].Blocks > 0, ok)
					if ok {
						require.Equal(rt, want[0].Server, srv)
						require.Equal(rt, want[0].Blocks, n)
					}
				}
				for _, s := range servers {
					require.Equal(rt, len(model[s]), c.Stats(s).Blocks)
				}
			},
		})
	})
}
