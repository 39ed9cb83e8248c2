package redisindex_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

func decoded(t testing.TB, payload []byte) *kvevents.Batch {
	t.Helper()
	b, err := kvevents.DecodeBatch(payload)
	require.NoError(t, err)
	return b
}

// TestRedisRestartMidStream stops Redis between two batches: the write fails with
// ErrUnavailable within the deadline, CheckRestart sees the new server, and replaying the
// stream from its start (what a JetStream consumer does) makes the index whole again.
func TestRedisRestartMidStream(t *testing.T) {
	srv := startOwnRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	x, err := redisindex.New(ctx, rdb, redisindex.Config{BlockSize: 16, Seed: fixtureSeed, Model: fixtureModel, Timeout: time.Second})
	require.NoError(t, err)
	stream := fixtureBatches()
	for _, fb := range stream[:2] {
		require.NoError(t, x.ApplyContext(ctx, fb.pod, decoded(t, fb.payload)))
	}

	srv.Stop()
	start := time.Now()
	err = x.ApplyContext(ctx, stream[2].pod, decoded(t, stream[2].payload))
	require.ErrorIs(t, err, redisindex.ErrUnavailable)
	require.Less(t, time.Since(start), 5*time.Second, "bounded by the deadline")
	_, err = x.MatchTokens(ctx, nil, "", tokens(1, 48))
	require.ErrorIs(t, err, redisindex.ErrUnavailable)

	srv.Restart(t) // no persistence: the index is gone
	restarted, err := x.CheckRestart(ctx)
	require.NoError(t, err)
	require.True(t, restarted)
	restarted, err = x.CheckRestart(ctx)
	require.NoError(t, err)
	require.False(t, restarted)
	for _, fb := range stream { // replay from the start
		require.NoError(t, x.ApplyContext(ctx, fb.pod, decoded(t, fb.payload)))
	}
	require.Equal(t, readTestdata(t, "llmd/keys.txt"), dump(t, rdb))
	require.Equal(t, uint64(1), x.Stats().Restarts)
}

// TestVanishedServerCleared: a server that stops sending is cleared by the liveness rule
// (Redis 7.0 cannot expire its hash fields), the others keep their entries.
func TestVanishedServerCleared(t *testing.T) {
	rdb := client(t)
	x := newIndex(t, rdb)
	ctx := context.Background()
	t0 := time.Unix(1000, 0) // a logical clock
	applyFixture(t, x)
	x.Seen("pod-a", t0)
	x.Seen("pod-b", t0)
	x.Seen("pod-c", t0)
	x.Seen("pod-b", t0.Add(20*time.Second))
	x.Seen("pod-c", t0.Add(25*time.Second))

	dead, err := x.Sweep(ctx, t0.Add(30*time.Second), 15*time.Second)
	require.NoError(t, err)
	require.Equal(t, []string{"pod-a"}, dead)
	hits, err := x.MatchTokens(ctx, nil, "", tokens(1, 48))
	require.NoError(t, err)
	require.Equal(t, []redisindex.Hit{{Server: "pod-b", Blocks: 3, GPUBlocks: 3}}, hits)

	dead, err = x.Sweep(ctx, t0.Add(31*time.Second), 15*time.Second)
	require.NoError(t, err)
	require.Empty(t, dead, "pod-a was forgotten; the others are alive")
	dead, err = x.Sweep(ctx, t0.Add(60*time.Second), 15*time.Second)
	require.NoError(t, err)
	require.Equal(t, []string{"pod-b", "pod-c"}, dead)
	require.Equal(t, "\n", keepOnlyHashes(dump(t, rdb)), "no server's entry is left")
}

func keepOnlyHashes(d string) string {
	out := ""
	for _, l := range splitLines(d) {
		if len(l) > 4 && l[:4] == "hash" {
			out += l + "\n"
		}
	}
	return out + "\n"
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// TestBoundsLeaveRedisUnchanged: a batch or argument over the bounds is refused with a
// typed error before anything is written.
func TestBoundsLeaveRedisUnchanged(t *testing.T) {
	rdb := client(t)
	ctx := context.Background()
	x, err := redisindex.New(ctx, rdb, redisindex.Config{BlockSize: 16, Model: fixtureModel, MaxBatchBlocks: 4})
	require.NoError(t, err)
	big := decoded(t, batch(stored([]any{ih(1), ih(2), ih(3)}, nil, toks(1, 48), nil, nil, nil)))
	require.ErrorIs(t, x.ApplyContext(ctx, "pod-a", big), redisindex.ErrTooLarge)
	require.ErrorIs(t, x.ApplyContext(ctx, "", big), redisindex.ErrInvalid)
	long := make([]byte, redisindex.MaxServerName+1)
	require.ErrorIs(t, x.ApplyContext(ctx, string(long), big), redisindex.ErrInvalid)
	require.ErrorIs(t, x.Add(ctx, nil, nil, []redisindex.Entry{{Server: "a"}}), redisindex.ErrInvalid)
	require.ErrorIs(t, x.Add(ctx, nil, []uint64{1}, []redisindex.Entry{{Server: "a", Group: -1}}), redisindex.ErrInvalid)
	require.ErrorIs(t, x.Evict(ctx, []uint64{1, 2, 3, 4, 5}, []redisindex.Entry{{Server: "a"}}), redisindex.ErrTooLarge)
	n, err := rdb.DBSize(ctx).Result()
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = redisindex.New(ctx, rdb, redisindex.Config{BlockSize: redisindex.MaxBlockSize + 1})
	require.ErrorIs(t, err, redisindex.ErrBlockSize)

	// Hostile fields in Redis are skipped, not trusted.
	require.NoError(t, rdb.HSet(ctx, "55", "not json", "", string(make([]byte, redisindex.MaxFieldBytes+1)), "").Err())
	per, err := x.Lookup(ctx, []uint64{55}, nil)
	require.NoError(t, err)
	require.Empty(t, per)
	// A key of another type under a number does not fail a lookup or a Clear.
	require.NoError(t, rdb.Set(ctx, "56", "x", 0).Err())
	per, err = x.Lookup(ctx, []uint64{56}, nil)
	require.NoError(t, err)
	require.Empty(t, per)
	require.NoError(t, x.Clear(ctx, "pod-a"))
}

func TestUnreachableRedisFailsFast(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	_, err := redisindex.New(context.Background(), rdb, redisindex.Config{})
	require.ErrorIs(t, err, redisindex.ErrUnavailable)
	require.False(t, errors.Is(err, redisindex.ErrInvalid))
}
