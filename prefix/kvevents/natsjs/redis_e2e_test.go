package natsjs_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
)

// TestJetStreamIntoRedis runs the whole path a shared-index deployment runs: kvpage
// servers publish to JetStream, two router replicas apply into one Redis in llm-d's
// layout, and either replica (or llm-d's scheduler) routes from it, an adapter's prompts
// included.
func TestJetStreamIntoRedis(t *testing.T) {
	nc, js := shared(t)
	addr := os.Getenv("KVPAGE_REDIS_ADDR")
	if addr == "" {
		needServer(t, "Redis", "KVPAGE_REDIS_ADDR")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, DB: 4})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	require.NoError(t, rdb.FlushDB(ctx).Err())
	x, err := redisindex.New(ctx, rdb, redisindex.Config{BlockSize: blockSize, Seed: seed, Model: "m"})
	require.NoError(t, err)

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
