package redisindex_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

var aclUsers atomic.Int64

// deniedClient is a client of the shared Redis on this package's flushed database, logged
// in as a fresh ACL user that may run every command but those denied: the refusals a
// router's Redis user meets when an operator forgot a permission.
func deniedClient(t *testing.T, deny ...string) *redis.Client {
	t.Helper()
	admin := client(t)
	ctx := context.Background()
	user := fmt.Sprintf("kvpage-redisindex-%d-%d", os.Getpid(), aclUsers.Add(1))
	rules := []any{"ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all"}
	for _, c := range deny {
		rules = append(rules, "-"+c)
	}
	require.NoError(t, admin.Do(ctx, rules...).Err())
	t.Cleanup(func() { _ = admin.Do(context.Background(), "ACL", "DELUSER", user).Err() })
	rdb := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, DB: testDB, Username: user, Password: "pw"})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// A command Redis answers with an error inside a pipeline fails the call with ErrRefused
// naming the command and its key (the EVALSHA of a prune script by its first key); they
// used to pass as empty results: an Add that wrote nothing, a Lookup or an eviction that
// saw nothing. A read of a key another application holds (WRONGTYPE) is not an entry and
// is skipped, so that a shared database cannot make Lookup or Clear fail for good. Against
// the real Redis server.
func TestPipelineCommandErrorsAreReturned(t *testing.T) {
	gpu := []redisindex.Entry{{Server: "pod-a", Tier: redisindex.DefaultTier}}
	add := func(ctx context.Context, x *redisindex.Index, rdb *redis.Client) error {
		return x.Add(ctx, []uint64{9}, []uint64{90, 91}, gpu)
	}
	for _, tc := range []struct {
		name    string
		deny    []string // commands the client's ACL user may not run
		strings []string // keys another application set to a string
		call    func(ctx context.Context, x *redisindex.Index, rdb *redis.Client) error
		want    string // in the error, after ErrRefused; "" for none
	}{
		{"Add", nil, nil, add, ""},
		{"Add onto a string block key", nil, []string{"91"}, add, "hset 91: WRONGTYPE"},
		{"Add onto a string engine key", nil, []string{"engine:9"}, add, "zadd engine:9: WRONGTYPE"},
		{"Add denied HSET", []string{"hset"}, nil, add, "hset 90: NOPERM"},
		{"Lookup denied HKEYS", []string{"hkeys"}, nil, func(ctx context.Context, x *redisindex.Index, rdb *redis.Client) error {
			_, err := x.Lookup(ctx, []uint64{90, 91}, nil)
			return err
		}, "hkeys 90: NOPERM"},
		{"Lookup over a string block key", nil, []string{"91"}, func(ctx context.Context, x *redisindex.Index, rdb *redis.Client) error {
			if err := x.Add(ctx, nil, []uint64{90}, gpu); err != nil {
				return err
			}
			per, err := x.Lookup(ctx, []uint64{90, 91}, nil)
			if err == nil && len(per) != 1 {
				err = fmt.Errorf("lookup of %d blocks, want 1", len(per))
			}
			return err
		}, ""},
		{"Clear over a string block key", nil, []string{"91"}, func(ctx context.Context, x *redisindex.Index, rdb *redis.Client) error {
			return x.Clear(ctx, "pod-a")
		}, ""},
		{"RequestKey denied ZREVRANGE", []string{"zrevrange"}, nil, func(ctx context.Context, x *redisindex.Index, rdb *redis.Client) error {
			_, _, err := x.RequestKey(ctx, 9)
			return err
		}, "zrevrange engine:9: NOPERM"},
		{"Evict of a string block key", nil, nil, func(ctx context.Context, x *redisindex.Index, rdb *redis.Client) error {
			if err := add(ctx, x, rdb); err != nil {
				return err
			}
			rdb.Del(ctx, "91")
			rdb.Set(ctx, "91", "another application's", 0)
			return x.Evict(ctx, []uint64{9}, gpu)
		}, "hdel 91: WRONGTYPE"},
		{"Evict denied EVALSHA", []string{"evalsha"}, nil, func(ctx context.Context, x *redisindex.Index, rdb *redis.Client) error {
			if err := add(ctx, x, rdb); err != nil {
				return err
			}
			return x.Evict(ctx, []uint64{9}, gpu)
		}, "evalsha (90): NOPERM"},
		{"Apply of a removal denied ZRANGE", []string{"zrange"}, nil, func(ctx context.Context, x *redisindex.Index, rdb *redis.Client) error {
			b := &kvevents.Batch{Events: []kvevents.Event{{Kind: kvevents.KindBlockRemoved, Hashes: []kvevents.ExternalHash{{Int: 9, IsInt: true}}}}}
			return x.ApplyContext(ctx, "pod-a", b)
		}, "zrange engine:9: NOPERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rdb *redis.Client
			if tc.deny != nil {
				rdb = deniedClient(t, tc.deny...)
			} else {
				rdb = client(t)
			}
			ctx := context.Background()
			x := newIndex(t, rdb)
			for _, k := range tc.strings {
				require.NoError(t, rdb.Set(ctx, k, "another application's", 0).Err())
			}
			err := tc.call(ctx, x, rdb)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, redisindex.ErrRefused)
			require.NotErrorIs(t, err, redisindex.ErrUnavailable)
			require.NotErrorIs(t, err, redisindex.ErrReadOnly, "only READONLY is")
			require.NotErrorIs(t, err, redisindex.ErrOutOfMemory, "only OOM is")
			require.ErrorContains(t, err, tc.want)
			var rerr redis.Error
			require.ErrorAs(t, err, &rerr, "Redis's reply stays reachable")
			require.True(t, strings.HasPrefix(rerr.Error(), strings.Fields(tc.want)[2]))
		})
	}
}
