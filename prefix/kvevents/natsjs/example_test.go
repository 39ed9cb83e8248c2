package natsjs_test

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents/natsjs"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// A router replica follows every server of the fleet through its durable consumer.
func ExampleNewSubscriber() {
	ctx := context.Background()
	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		fmt.Println("no NATS here")
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	index, _ := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), 16)
	// FromStart: this index lives in memory, so it rebuilds itself from the stream.
	sub, err := natsjs.NewSubscriber(ctx, js, index, natsjs.SubscriberConfig{Replica: "router-0", FromStart: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sub.Close()
}
