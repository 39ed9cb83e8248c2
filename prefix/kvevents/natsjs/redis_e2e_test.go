package natsjs_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/internal/testserver"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/kvevents/natsjs"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// TestJetStreamIntoRedis runs the whole path a shared-index deployment runs: kvpage
// servers publish to JetStream, two router replicas apply into one Redis in llm-d's
// layout, and either replica (or llm-d's scheduler) routes from it, an adapter's prompts
// included.
func TestJetStreamIntoRedis(t *testing.T) {
	nc, js := shared(t)
	x, _ := newRedisIndex(t, 4)

	sc := testStream(t, js)
	a, b := newServer(t, nc, "a", sc, 1), newServer(t, nc, "b", sc, 1)
	s1 := subscribe(t, js, x, "r1", sc, true)
	defer s1.Close()
	s2 := subscribe(t, js, x, "r2", sc, true) // a second replica writing the same keys
	defer s2.Close()

	sys := seqTokens(1000, 1024)
	lastA := a.serve(t, append(append([]int32(nil), sys...), 1, 2))
	lora := prefix.Namespace{LoRA: "sql-lora"}
	lastB := b.serveNS(t, lora, seqTokens(0, 8))
	waitFor(t, s1, a.pub, lastA)
	waitFor(t, s2, a.pub, lastA)
	waitFor(t, s1, b.pub, lastB)
	waitFor(t, s2, b.pub, lastB)

	hits, err := x.Match(nil, &prefix.Prompt{Tokens: append(sys, 7)})
	require.NoError(t, err)
	require.Equal(t, []cluster.ServerHit{{Server: "a", Blocks: 6}}, hits)
	hits, err = x.Match(nil, &prefix.Prompt{Namespace: lora, Tokens: seqTokens(0, 9)})
	require.NoError(t, err)
	require.Equal(t, []cluster.ServerHit{{Server: "b", Blocks: 2}}, hits)
	hits, err = x.Match(nil, &prefix.Prompt{Tokens: seqTokens(0, 9)})
	require.NoError(t, err)
	require.Empty(t, hits, "the same tokens without the adapter are other blocks")
}

// TestGroupOverJetStreamIntoRedis: a server publishing one KV-cache group's events
// (kvevents.WithGroup) reaches Redis with the group in every entry, as llm-d writes it.
func TestGroupOverJetStreamIntoRedis(t *testing.T) {
	nc, js := shared(t)
	x, rdb := newRedisIndex(t, 5)
	ctx := context.Background()

	sc := testStream(t, js)
	pub, err := natsjs.NewPublisher(t.Context(), nc, natsjs.PublisherConfig{
		Server: "hyb", Stream: sc, Epoch: 1, Events: []kvevents.Option{kvevents.WithGroup(1)},
	})
	require.NoError(t, err)
	pool, err := blocks.New(64, blocks.WithNullBlock())
	require.NoError(t, err)
	index, err := prefix.New(pool, blockSize, prefix.WithHasher(vllmhash.NewSHA256CBOR(seed)), prefix.WithObserver(pub))
	require.NoError(t, err)
	mgr, err := blocktable.New(blocktable.Config{Pool: pool, Index: index, BlockSize: blockSize})
	require.NoError(t, err)
	s := &server{name: "hyb", mgr: mgr, pub: pub}
	sub := subscribe(t, js, x, "r", sc, true)
	defer sub.Close()
	waitFor(t, sub, pub, s.serve(t, seqTokens(0, 3*blockSize)))

	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	const f = `{"PodIdentifier":"hyb","DeviceTier":"gpu","Speculative":false,"HasGroup":true,"GroupIdx":1}`
	var hashes int
	for _, k := range keys {
		if strings.HasPrefix(k, "engine:") {
			continue
		}
		fields, err := rdb.HKeys(ctx, k).Result()
		require.NoError(t, err)
		require.Equal(t, []string{f}, fields, "key %s", k)
		hashes++
	}
	require.Equal(t, 3, hashes)
	hits, err := x.Match(nil, &prefix.Prompt{Tokens: seqTokens(0, 3*blockSize)})
	require.NoError(t, err)
	require.Equal(t, []cluster.ServerHit{{Server: "hyb", Blocks: 3}}, hits)
}

// newRedisIndex returns an index in llm-d's layout over database db of the Redis at
// KVPAGE_REDIS_ADDR, emptied first (each test its own database), and its client; it skips
// the test without one.
func newRedisIndex(t *testing.T, db int) (*redisindex.Index, *redis.Client) {
	t.Helper()
	addr := os.Getenv("KVPAGE_REDIS_ADDR")
	if addr == "" {
		testserver.Need(t, "Redis", "KVPAGE_REDIS_ADDR")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, DB: db})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	require.NoError(t, rdb.FlushDB(ctx).Err())
	x, err := redisindex.New(ctx, rdb, redisindex.Config{BlockSize: blockSize, Seed: seed, Model: "m"})
	require.NoError(t, err)
	return x, rdb
}
