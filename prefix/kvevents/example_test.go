package kvevents_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// A server's prefix index hashes as vLLM does and reports what it caches; a router learns
// it from the events and sends the next request with the same prefix to that server. (A
// real server publishes with NewPublisher instead of a Batcher, and the router reads the
// batches with NewSubscriber.)
func Example() {
	pool, _ := blocks.New(16, blocks.WithNullBlock())
	events := kvevents.NewBatcher()
	index, _ := prefix.New(pool, 4,
		prefix.WithHasher(kvevents.NewSHA256CBOR("42")), // PYTHONHASHSEED=42
		prefix.WithObserver(events))

	// The server caches a 3-block prompt, as a finished request leaves it.
	p := &prefix.Prompt{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}
	ids, _ := pool.Allocate(nil, 3)
	cur := index.Cursor(p.Namespace)
	_, _ = index.Commit(&cur, p, ids)
	_ = index.Release(ids)

	// One scheduler step's events, as they would travel. The first hash is what Python's
	// cbor2 and hashlib give for vLLM's (NONE_HASH, (1, 2, 3, 4), None).
	batch, _ := kvevents.DecodeBatch(events.AppendBatch(nil, 1700000000))
	stored := batch.Events[0]
	fmt.Println(stored.Kind, len(stored.Hashes), "blocks, first", hex.EncodeToString(stored.Hashes[0].Bytes)[:16])

	router := kvevents.NewClusterIndex(kvevents.NewSHA256CBOR("42"), 4)
	router.Apply("server-a", batch)
	next := &prefix.Prompt{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8, 99, 99, 99, 99}}
	server, hit, _ := router.Route(next)
	fmt.Println("route to", server, "with", hit, "blocks cached")
	// Output:
	// BlockStored 3 blocks, first 0a99040f25d8a5f2
	// route to server-a with 2 blocks cached
}

// The hash vLLM computes for the first block of tokens 0..15 with PYTHONHASHSEED=42, and
// its 64-bit form.
func ExampleSHA256CBOR() {
	h := kvevents.NewSHA256CBOR("42")
	tokens := make([]int32, 16)
	for i := range tokens {
		tokens[i] = int32(i)
	}
	dst := make([]byte, h.Size())
	h.Block(dst, nil, tokens, prefix.Extra{})
	fmt.Println(hex.EncodeToString(dst))
	fmt.Println(kvevents.Uint64(dst))
	// Output:
	// 63876f948a5f9ef88191c7d6554fbeeea5c622d4da15d0d527bd352623590b0d
	// 2863503375995570957
}

// A server publishes its index's events over ZeroMQ; a router subscribes, catches up and
// routes. (Loopback, ports chosen by the system.)
func ExampleNewPublisher() {
	pub, err := kvevents.NewPublisher("tcp://127.0.0.1:0", kvevents.WithReplay("tcp://127.0.0.1:0"))
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	pool, _ := blocks.New(16, blocks.WithNullBlock())
	index, _ := prefix.New(pool, 4, prefix.WithHasher(kvevents.NewSHA256CBOR("42")), prefix.WithObserver(pub))

	router := kvevents.NewClusterIndex(kvevents.NewSHA256CBOR("42"), 4)
	sub, err := kvevents.NewSubscriber(router, "server-a", pub.Endpoint(), kvevents.SubscribeReplay(pub.ReplayEndpoint()))
	if err != nil {
		panic(err)
	}
	defer sub.Close()

	// One scheduler step caches a prompt; the step ends with a Flush.
	p := &prefix.Prompt{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8}}
	ids, _ := pool.Allocate(nil, 2)
	cur := index.Cursor(p.Namespace)
	_, _ = index.Commit(&cur, p, ids)
	_ = index.Release(ids)
	seq, _ := pub.Flush()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sub.WaitFor(ctx, seq); err != nil {
		panic(err)
	}
	server, hit, _ := router.Route(&prefix.Prompt{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}})
	fmt.Println(server, hit)
	// Output: server-a 2
}
