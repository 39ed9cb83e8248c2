package zmq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents/zmq"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// A server publishes its index's events over ZeroMQ; a router subscribes, catches up and
// routes. (Loopback, ports chosen by the system.)
func ExampleNewPublisher() {
	pub, err := zmq.NewPublisher("tcp://127.0.0.1:0", zmq.WithReplay("tcp://127.0.0.1:0"))
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	pool, _ := blocks.New(16, blocks.WithNullBlock())
	index, _ := prefix.New(pool, 4, prefix.WithHasher(vllmhash.NewSHA256CBOR("42")), prefix.WithObserver(pub))

	router, _ := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), 4)
	sub, err := zmq.NewSubscriber(router, "server-a", pub.Endpoint(), zmq.SubscribeReplay(pub.ReplayEndpoint()))
	if err != nil {
		panic(err)
	}
	defer sub.Close()

	// One scheduler step caches a prompt; the step ends with a Flush.
	p := &prefix.Prompt{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8}}
	ids, _ := pool.Allocate(nil, 2)
	var cur prefix.Cursor // no hit: the namespace's root
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
