package redisindex_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/internal/testserver"
	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
)

// transientCalls are the index's calls, each of which must fail against a Redis in a
// passing state with ErrUnavailable naming the state, never ErrRefused.
func transientCalls(t *testing.T, x *redisindex.Index) map[string]func(context.Context) error {
	b := decoded(t, fixtureBatches()[0].payload)
	return map[string]func(context.Context) error{
		"Apply":  func(ctx context.Context) error { return x.ApplyContext(ctx, "pod-a", b) },
		"Lookup": func(ctx context.Context) error { _, err := x.Lookup(ctx, []uint64{1, 2}, nil); return err },
		"Clear":  func(ctx context.Context) error { return x.Clear(ctx, "pod-a") },
	}
}

func requireUnavailable(t *testing.T, err error, state string) {
	t.Helper()
	require.ErrorIs(t, err, redisindex.ErrUnavailable)
	require.NotErrorIs(t, err, redisindex.ErrRefused, "a caller taking ErrRefused for good would give up on a state that passes")
	require.ErrorContains(t, err, state)
	var rerr redis.Error
	require.ErrorAs(t, err, &rerr, "Redis's reply stays reachable")
}

// A restarted Redis loading its dataset answers LOADING: the index's calls fail with
// ErrUnavailable, which a caller retries, not ErrRefused. Against the real server,
// restarted here on a dataset that takes longer to load than any test may run, so that no
// schedule of a loaded machine can see the loading end: 16,384 keys, each slept on for
// 250 ms (key-load-delay), 68 minutes in all, against go test's 10-minute default timeout
// and CI's 25. Each key's value is 1 KiB of incompressible bytes, over
// loading-process-events-interval-bytes, so the server answers its clients after every
// key it loads, within about 250 ms. The server is killed when the test ends. (Before,
// 20,000 small keys at 1 ms each made a 20-second window, which a loaded machine could
// outlast.)
func TestLoadingRedisIsUnavailable(t *testing.T) {
	bin := testserver.Binary(t, "KVPAGE_REDIS_SERVER", "redis-server")
	port := testserver.FreePort(t)
	addr := "127.0.0.1:" + port
	up := func() bool { return testserver.Listening(addr) }
	args := []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}
	first := testserver.Start(t, up, bin, args...)
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	// The timeout only bounds a failure: a reply takes one key's delay.
	x, err := redisindex.New(ctx, rdb, redisindex.Config{BlockSize: 16, Seed: fixtureSeed, Model: fixtureModel, Timeout: time.Minute})
	require.NoError(t, err)
	const keys, keyDelayMicros = 16384, 250_000
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 1024)
	for from := 0; from < keys; from += 1024 {
		pipe := rdb.Pipeline()
		for i := from; i < from+1024; i++ {
			for j := range value {
				value[j] = byte(rng.Uint32())
			}
			pipe.Set(ctx, fmt.Sprintf("filler:%d", i), string(value), 0)
		}
		_, err = pipe.Exec(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, rdb.Save(ctx).Err())
	first.Stop()
	testserver.Start(t, up, bin, append(args, "--key-load-delay", strconv.Itoa(keyDelayMicros), "--loading-process-events-interval-bytes", "1024")...)
	for name, call := range transientCalls(t, x) {
		t.Run(name, func(t *testing.T) { requireUnavailable(t, call(ctx), "LOADING") })
	}
	info, err := rdb.Info(ctx, "persistence").Result()
	require.NoError(t, err, "INFO answers while loading")
	require.Contains(t, info, "loading:1", "still loading: the replies were not a race with its end")
}

// A Redis running a script past busy-reply-threshold answers BUSY to everything but
// SCRIPT KILL and SHUTDOWN: ErrUnavailable too, CheckRestart's INFO included. The script
// is an endless loop on a connection of its own, killed at the end.
//
// The test waits for events, not for time: the script first publishes on a channel the
// test subscribed to, and Redis writes that message from its event loop, which a running
// script lets run only once it is past busy-reply-threshold, to answer BUSY. So the
// message says the server answers BUSY (a PING then confirms it, polled should the
// server flush the message sooner). The one bound, a minute, only bounds a failure: a
// script that never starts, or a server that never says BUSY.
func TestBusyRedisIsUnavailable(t *testing.T) {
	srv := startOwnRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	x, err := redisindex.New(ctx, rdb, redisindex.Config{BlockSize: 16, Seed: fixtureSeed, Model: fixtureModel, Timeout: 5 * time.Second})
	require.NoError(t, err)
	require.NoError(t, rdb.ConfigSet(ctx, "busy-reply-threshold", "1").Err())
	const ready = "kvpage-test:looping"
	sub := rdb.Subscribe(ctx, ready)
	t.Cleanup(func() { _ = sub.Close() })
	_, err = sub.Receive(ctx) // the subscription is confirmed before the script runs
	require.NoError(t, err)
	blocker := redis.NewClient(&redis.Options{Addr: srv.addr, MaxRetries: -1, ReadTimeout: -1})
	t.Cleanup(func() { _ = blocker.Close() })
	looped := make(chan error, 1)
	go func() {
		looped <- blocker.Eval(ctx, "redis.call('PUBLISH', KEYS[1], 'looping') while true do end", []string{ready}).Err()
	}()
	bound, cancel := context.WithTimeout(ctx, time.Minute) // a failure's bound only
	defer cancel()
	select {
	case <-sub.Channel():
	case err := <-looped:
		t.Fatalf("the script ended: %v", err)
	case <-bound.Done():
		t.Fatal("the script never published: Redis never ran it")
	}
	for !redis.HasErrorPrefix(rdb.Ping(bound).Err(), "BUSY ") {
		require.NoError(t, bound.Err(), "Redis never became BUSY")
		time.Sleep(time.Millisecond)
	}
	calls := transientCalls(t, x)
	calls["CheckRestart"] = func(ctx context.Context) error { _, err := x.CheckRestart(ctx); return err }
	for name, call := range calls {
		t.Run(name, func(t *testing.T) { requireUnavailable(t, call(ctx), "BUSY") })
	}
	require.NoError(t, rdb.ScriptKill(ctx).Err())
	require.Error(t, <-looped, "the script was killed")
	require.NoError(t, x.Clear(ctx, "pod-a"), "the state passed")
}
