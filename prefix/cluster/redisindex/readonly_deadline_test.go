package redisindex_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/internal/testserver"
	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// A write whose go-redis retry backoff outlasts the call's deadline (Config.Timeout)
// still returns ErrReadOnly, the reply the replica gave, not the deadline's
// ErrUnavailable: a router told "unavailable" would retry a replica for ever. go-redis
// keeps each command's last reply when the deadline ends the backoff; the index prefers
// it over the deadline. Counted on a real replica: one attempt reached it (its writes
// rejected once each), the retry never went out.
func TestReadOnlyUnderADeadlineThatEndsTheBackoff(t *testing.T) {
	srv := startOwnRedis(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.addr, MaxRetries: -1})
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	gpu := []redisindex.Entry{{Server: "pod-a", Tier: redisindex.DefaultTier}}
	stored := &kvevents.Batch{Events: []kvevents.Event{{Kind: kvevents.KindBlockStored,
		Hashes: []kvevents.ExternalHash{{Int: 7, IsInt: true}}, Tokens: make([]int32, 16)}}}
	{
		x, err := redisindex.New(ctx, admin, redisindex.Config{BlockSize: 16, Seed: fixtureSeed, Model: fixtureModel})
		require.NoError(t, err)
		require.NoError(t, x.Add(ctx, []uint64{9}, []uint64{90}, gpu))
	}
	require.NoError(t, admin.Do(ctx, "REPLICAOF", "127.0.0.1", testserver.FreePort(t)).Err())

	index := func(maxRetries int, backoff time.Duration) *redisindex.Index {
		rdb := redis.NewClient(&redis.Options{Addr: srv.addr, MaxRetries: maxRetries,
			MinRetryBackoff: backoff, MaxRetryBackoff: backoff})
		t.Cleanup(func() { _ = rdb.Close() })
		x, err := redisindex.New(ctx, rdb, redisindex.Config{BlockSize: 16, Seed: fixtureSeed, Model: fixtureModel,
			Timeout: 200 * time.Millisecond})
		require.NoError(t, err, "New only reads")
		return x
	}
	// once sends every write once; x retries five times, each after a backoff of a
	// minute, which the 200 ms deadline ends before the first retry.
	once, x := index(-1, time.Millisecond), index(5, time.Minute)
	for _, c := range []struct {
		name string
		call func(x *redisindex.Index) error
	}{
		{"Add", func(x *redisindex.Index) error { return x.Add(ctx, []uint64{8}, []uint64{80, 81}, gpu) }},
		{"Apply", func(x *redisindex.Index) error { return x.ApplyContext(ctx, "pod-b", stored) }},
		{"Evict", func(x *redisindex.Index) error { return x.Evict(ctx, []uint64{9}, gpu) }},
	} {
		require.NoError(t, admin.ConfigResetStat(ctx).Err())
		require.ErrorIs(t, c.call(once), redisindex.ErrReadOnly, c.name)
		perAttempt := rejectedCalls(t, admin)
		require.Positive(t, perAttempt, "%s: its writes reach the replica", c.name)

		require.NoError(t, admin.ConfigResetStat(ctx).Err())
		err := c.call(x)
		require.ErrorIs(t, err, redisindex.ErrReadOnly, c.name)
		require.NotErrorIs(t, err, redisindex.ErrUnavailable, c.name)
		require.ErrorContains(t, err, "READONLY", c.name)
		require.Equal(t, perAttempt, rejectedCalls(t, admin), "%s: one attempt, its retry cut off by the deadline", c.name)
	}
	// A deadline that ends the backoff of a write Redis never answered is still
	// ErrUnavailable: no reply to prefer.
	srv.Stop()
	require.ErrorIs(t, x.Add(ctx, []uint64{8}, []uint64{80}, gpu), redisindex.ErrUnavailable)
}
