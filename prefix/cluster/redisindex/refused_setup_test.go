package redisindex_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
)

// The calls outside a pipeline (New's INFO and SCRIPT LOAD, CheckRestart's INFO, Clear's
// SCAN) tell a refusal from a Redis they could not reach as the pipelines do: what Redis
// answered with an error (NOPERM here, as for a router's user an operator forgot a
// permission for) is ErrRefused naming the command, not ErrUnavailable, which would send
// a caller to retry a call that can never succeed. Against the real Redis server.
func TestSetupCommandErrorsAreRefusals(t *testing.T) {
	cfg := redisindex.Config{BlockSize: 16, Seed: fixtureSeed, Model: fixtureModel}
	for _, tc := range []struct {
		name   string
		deny   []string // before New
		revoke []string // after New
		call   func(ctx context.Context, x *redisindex.Index) error
		want   string
	}{
		{"New denied SCRIPT", []string{"script"}, nil, nil, "script load: NOPERM"},
		{"New denied INFO", []string{"info"}, nil, nil, "info server: NOPERM"},
		{"CheckRestart denied INFO", nil, []string{"info"}, func(ctx context.Context, x *redisindex.Index) error {
			_, err := x.CheckRestart(ctx)
			return err
		}, "info server: NOPERM"},
		{"Clear denied SCAN", nil, []string{"scan"}, func(ctx context.Context, x *redisindex.Index) error {
			return x.Clear(ctx, "pod-a")
		}, "scan 0: NOPERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := deniedClient(t, tc.deny...)
			x, err := redisindex.New(ctx, rdb, cfg)
			if tc.call != nil {
				require.NoError(t, err)
				rules := []any{"ACL", "SETUSER", rdb.Options().Username}
				for _, c := range tc.revoke {
					rules = append(rules, "-"+c)
				}
				require.NoError(t, client(t).Do(ctx, rules...).Err())
				err = tc.call(ctx, x)
			}
			require.ErrorIs(t, err, redisindex.ErrRefused)
			require.NotErrorIs(t, err, redisindex.ErrUnavailable)
			require.ErrorContains(t, err, tc.want)
			var rerr redis.Error
			require.ErrorAs(t, err, &rerr, "Redis's reply stays reachable")
		})
	}
}

// And a Redis that is not there is ErrUnavailable, never ErrRefused, on the same paths.
func TestSetupCommandsOnAStoppedRedisAreUnavailable(t *testing.T) {
	srv := startOwnRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	x, err := redisindex.New(ctx, rdb, redisindex.Config{Timeout: time.Second})
	require.NoError(t, err)
	srv.Stop()
	_, err = redisindex.New(ctx, rdb, redisindex.Config{Timeout: time.Second})
	_, rerr := x.CheckRestart(ctx)
	for _, err := range []error{err, rerr, x.Clear(ctx, "pod-a")} {
		require.ErrorIs(t, err, redisindex.ErrUnavailable)
		require.NotErrorIs(t, err, redisindex.ErrRefused)
	}
}
