package redisindex_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/internal/testserver"
	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// rejectedCalls sums the rejected_calls of every command in INFO commandstats: the
// commands Redis refused before running them (READONLY on a replica), attempt by attempt.
func rejectedCalls(t *testing.T, admin *redis.Client) int {
	t.Helper()
	info, err := admin.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(info, "\n") {
		_, rest, ok := strings.Cut(line, "rejected_calls=")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		k, err := strconv.Atoi(strings.TrimSpace(v))
		require.NoError(t, err, line)
		n += k
	}
	return n
}

// connectionsReceived is INFO stats' total_connections_received, which CONFIG RESETSTAT
// does not reset.
func connectionsReceived(t *testing.T, admin *redis.Client) int {
	t.Helper()
	info, err := admin.Info(context.Background(), "stats").Result()
	require.NoError(t, err)
	_, rest, ok := strings.Cut(info, "total_connections_received:")
	require.True(t, ok, info)
	v, _, _ := strings.Cut(rest, "\r")
	n, err := strconv.Atoi(strings.TrimSpace(v))
	require.NoError(t, err)
	return n
}

// How often a write reaches a replica before ErrReadOnly reaches the caller is the
// caller's go-redis Options.MaxRetries, which the index does not override: go-redis
// retries a pipeline whose first reply is READONLY (it closes the connection and dials
// again, so a Sentinel FailoverClient or a DNS name re-resolves the master; a
// ClusterClient reloads its slots), 1+MaxRetries attempts in all (4 at its default of 3;
// 1 with MaxRetries -1), with its backoff between them, and never past the call's
// deadline (Config.Timeout). Counted on the real replica, attempt by attempt, in INFO
// commandstats: every attempt sends the whole pipeline again, and each of its writes is
// rejected once an attempt.
func TestReadOnlyAttemptsAreTheCallersMaxRetries(t *testing.T) {
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
	// A failover's new master, not reachable: the replica never syncs (never LOADING).
	require.NoError(t, admin.Do(ctx, "REPLICAOF", "127.0.0.1", testserver.FreePort(t)).Err())

	calls := []struct {
		name string
		call func(x *redisindex.Index) error
	}{
		{"Add", func(x *redisindex.Index) error { return x.Add(ctx, []uint64{8}, []uint64{80, 81}, gpu) }},
		{"Apply", func(x *redisindex.Index) error { return x.ApplyContext(ctx, "pod-b", stored) }},
		{"Evict", func(x *redisindex.Index) error { return x.Evict(ctx, []uint64{9}, gpu) }},
	}
	perAttempt := map[string]int{}
	for _, tc := range []struct {
		maxRetries int
		attempts   int
	}{{-1, 1}, {0, 4}, {1, 2}, {5, 6}} {
		rdb := redis.NewClient(&redis.Options{Addr: srv.addr, MaxRetries: tc.maxRetries,
			MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 2 * time.Millisecond})
		t.Cleanup(func() { _ = rdb.Close() })
		x, err := redisindex.New(ctx, rdb, redisindex.Config{BlockSize: 16, Seed: fixtureSeed, Model: fixtureModel, Timeout: 30 * time.Second})
		require.NoError(t, err, "New only reads")
		for _, c := range calls {
			require.NoError(t, admin.ConfigResetStat(ctx).Err())
			dials := connectionsReceived(t, admin)
			err := c.call(x)
			dials = connectionsReceived(t, admin) - dials
			require.ErrorIs(t, err, redisindex.ErrReadOnly, c.name)
			got := rejectedCalls(t, admin)
			if tc.maxRetries == -1 {
				require.Positive(t, got, "%s: its writes reach the replica", c.name)
				perAttempt[c.name] = got
				continue
			}
			require.Equal(t, tc.attempts*perAttempt[c.name], got,
				"%s with MaxRetries %d: %d attempts of %d rejected writes", c.name, tc.maxRetries, tc.attempts, perAttempt[c.name])
			require.GreaterOrEqual(t, dials, tc.attempts-1, "%s: each retry dials again (a READONLY connection is closed)", c.name)
		}
	}
}
