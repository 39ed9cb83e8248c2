package cluster_test

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// A server caches a prompt and reports it; the router learns it from the batch and sends
// the next request with the same prefix to that server.
func Example() {
	pool, _ := blocks.New(16, blocks.WithNullBlock())
	events, _ := kvevents.NewBatcher()
	index, _ := prefix.New(pool, 4,
		prefix.WithHasher(vllmhash.NewSHA256CBOR("42")), // PYTHONHASHSEED=42
		prefix.WithObserver(events))
	p := &prefix.Prompt{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}
	ids, _ := pool.Allocate(nil, 3)
	var cur prefix.Cursor // no hit: the namespace's root
	_, _ = index.Commit(&cur, p, ids)
	_ = index.Release(ids)
	batch, _ := kvevents.DecodeBatch(events.AppendBatch(nil, 1700000000))

	router, _ := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), 4)
	_ = router.Apply("server-a", batch)
	next := &prefix.Prompt{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8, 99, 99, 99, 99}}
	server, hit, _ := router.Route(next)
	fmt.Println("route to", server, "with", hit, "blocks cached")
	// Output:
	// route to server-a with 2 blocks cached
}

// A router weighs each server's cached prefix against its load.
func ExampleRouter() {
	idx, _ := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("0"), 4)
	sys := &prefix.Prompt{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}
	_ = idx.Apply("gpu-1", storeBatch(sys)) // gpu-1 served the prompt before
	r := cluster.Router{Index: idx, Policy: cluster.PrefixLoad{Weight: 0.3}}
	servers := []string{"gpu-0", "gpu-1"}
	d, _ := r.Route(sys, servers, []float64{2, 3})
	fmt.Println(d.Server, d.Cached)
	d, _ = r.Route(sys, servers, []float64{2, 30}) // gpu-1 is swamped
	fmt.Println(d.Server, d.Cached)
	// Output:
	// gpu-1 3
	// gpu-0 0
}

// storeBatch is the batch a server sends after caching p's full blocks of 4 tokens.
func storeBatch(p *prefix.Prompt) *kvevents.Batch {
	pool, _ := blocks.New(16, blocks.WithNullBlock())
	events, _ := kvevents.NewBatcher()
	index, _ := prefix.New(pool, 4, prefix.WithHasher(vllmhash.NewSHA256CBOR("0")), prefix.WithObserver(events))
	ids, _ := pool.Allocate(nil, len(p.Tokens)/4)
	var cur prefix.Cursor
	_, _ = index.Commit(&cur, p, ids)
	b, _ := kvevents.DecodeBatch(events.AppendBatch(nil, 1))
	return b
}
