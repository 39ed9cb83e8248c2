package cluster_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// hashCounter is vLLM's hasher counting the blocks it hashes.
type hashCounter struct {
	*vllmhash.SHA256CBOR
	blocks int
}

func (h *hashCounter) Block(dst, parent []byte, tokens []int32, e prefix.Extra) {
	h.blocks++
	h.SHA256CBOR.Block(dst, parent, tokens, e)
}

// BenchmarkRoutePartialHit routes a 32k-token prompt (2,048 blocks of 16) over 8 servers
// of which one holds its first held blocks and the others another prompt: the lookup's
// cost is its hashing, which stops at the first block no server holds. It reports the
// blocks hashed per Route.
//
//	go test -run '^$' -bench RoutePartialHit -count 6 ./prefix/cluster/
func BenchmarkRoutePartialHit(b *testing.B) {
	const bs, blocks = 16, 2048
	p := prompt(prefix.Namespace{}, 0, bs*blocks)
	other := prompt(prefix.Namespace{}, 1_000_000, bs*64)
	for _, held := range []int{0, 16, 256, blocks} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			h := &hashCounter{SHA256CBOR: vllmhash.NewSHA256CBOR("42")}
			c, err := cluster.NewClusterIndex(h, bs)
			require.NoError(b, err)
			for i := range 7 {
				require.NoError(b, c.Apply(fmt.Sprintf("s%d", i), storeChain(b, "42", other, bs, 0, 64)))
			}
			if held > 0 {
				require.NoError(b, c.Apply("hit", storeChain(b, "42", p, bs, 0, held)))
			}
			h.blocks = 0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, n, _ := c.Route(p); n != held {
					b.Fatalf("routed with %d blocks, want %d", n, held)
				}
			}
			b.ReportMetric(float64(h.blocks)/float64(b.N), "blocks-hashed/op")
		})
	}
}
