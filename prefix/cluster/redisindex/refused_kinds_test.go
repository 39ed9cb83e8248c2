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

// A write Redis refuses for a reason a router can act on has its own error, which is
// also ErrRefused (a caller that only tells a refusal from ErrUnavailable is unchanged):
// READONLY, a failover having made the index's master a replica, is ErrReadOnly; OOM, a
// write past maxmemory under noeviction, is ErrOutOfMemory. Both used to be ErrRefused
// alone. Nothing is written, reads still work, and the same call succeeds once the cause
// is gone. Against real redis-servers started here: the shared one must not be made a
// replica or given a maxmemory.
func TestReadOnlyAndOutOfMemoryAreTheirOwnRefusals(t *testing.T) {
	gpu := []redisindex.Entry{{Server: "pod-a", Tier: redisindex.DefaultTier}}
	stored := &kvevents.Batch{Events: []kvevents.Event{{Kind: kvevents.KindBlockStored,
		Hashes: []kvevents.ExternalHash{{Int: 7, IsInt: true}}, Tokens: make([]int32, 16)}}}
	// The new master a failover chose, not reachable yet: the replica keeps its data and
	// serves reads (replica-serve-stale-data yes), and never starts a sync, so it never
	// answers LOADING instead.
	newMaster := testserver.FreePort(t)
	for _, tc := range []struct {
		name         string
		want, other  error
		code         string
		cause, mend  [][]any // commands that cause the refusal and end it
		evictRefused bool    // the prune script writes nothing to refuse under OOM
	}{
		{"a failover made the master a replica", redisindex.ErrReadOnly, redisindex.ErrOutOfMemory, "READONLY",
			[][]any{{"REPLICAOF", "127.0.0.1", newMaster}}, [][]any{{"REPLICAOF", "NO", "ONE"}}, true},
		{"maxmemory under noeviction", redisindex.ErrOutOfMemory, redisindex.ErrReadOnly, "OOM",
			[][]any{{"CONFIG", "SET", "maxmemory-policy", "noeviction"}, {"CONFIG", "SET", "maxmemory", "1"}},
			[][]any{{"CONFIG", "SET", "maxmemory", "0"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startOwnRedis(t)
			rdb := redis.NewClient(&redis.Options{Addr: srv.addr})
			t.Cleanup(func() { _ = rdb.Close() })
			ctx := context.Background()
			x, err := redisindex.New(ctx, rdb, redisindex.Config{BlockSize: 16, Seed: fixtureSeed, Model: fixtureModel, Timeout: 30 * time.Second})
			require.NoError(t, err)
			require.NoError(t, x.Add(ctx, []uint64{9}, []uint64{90}, gpu))
			before := dump(t, rdb)
			for _, c := range tc.cause {
				require.NoError(t, rdb.Do(ctx, c...).Err())
			}
			calls := map[string]func() error{
				"Add":   func() error { return x.Add(ctx, []uint64{8}, []uint64{80, 81}, gpu) },
				"Apply": func() error { return x.ApplyContext(ctx, "pod-b", stored) },
			}
			if tc.evictRefused {
				calls["Evict"] = func() error { return x.Evict(ctx, []uint64{9}, gpu) }
			}
			for name, call := range calls {
				err := call()
				require.ErrorIs(t, err, tc.want, name)
				require.ErrorIs(t, err, redisindex.ErrRefused, name)
				require.NotErrorIs(t, err, tc.other, name)
				require.NotErrorIs(t, err, redisindex.ErrUnavailable, name)
				var rerr redis.Error
				require.ErrorAs(t, err, &rerr, "%s: Redis's reply stays reachable", name)
				require.True(t, redis.HasErrorPrefix(rerr, tc.code), "%s: %v", name, err)
			}
			per, err := x.Lookup(ctx, []uint64{90}, nil)
			require.NoError(t, err, "reads still work")
			require.Len(t, per, 1)
			require.Equal(t, before, dump(t, rdb), "nothing written")
			for _, c := range tc.mend {
				require.NoError(t, rdb.Do(ctx, c...).Err())
			}
			for name, call := range calls {
				require.NoError(t, call(), "%s once the cause is gone", name)
			}
		})
	}
}
