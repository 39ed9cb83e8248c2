package redisindex_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
)

// calls returns how often Redis ran each of EVAL and EVALSHA (INFO commandstats).
func calls(t *testing.T, rdb *redis.Client) (eval, evalsha int) {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, _ := strconv.Atoi(calls)
		switch name {
		case "cmdstat_eval":
			eval = n
		case "cmdstat_evalsha":
			evalsha = n
		}
	}
	return eval, evalsha
}

// The prune scripts travel as EVALSHA (New loads them), and still run when Redis has lost
// them: a NOSCRIPT is answered by EVAL, which loads the script again. The fixture's
// removals prune exactly what llm-d's do in every case. Its own server: SCRIPT FLUSH is
// server-wide.
func TestPruneScriptsUseEVALSHA(t *testing.T) {
	srv := startOwnRedis(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		flush     bool // SCRIPT FLUSH after New
		wantEval  bool // EVAL ran (the fallback)
		wantCalls bool // EVALSHA ran
	}{
		{"scripts loaded", false, false, true},
		{"scripts flushed after New", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: srv.addr})
			t.Cleanup(func() { _ = rdb.Close() })
			require.NoError(t, rdb.FlushAll(ctx).Err())
			require.NoError(t, rdb.ConfigResetStat(ctx).Err())
			x := newIndex(t, rdb)
			if tc.flush {
				require.NoError(t, rdb.ScriptFlush(ctx).Err())
			}
			applyFixture(t, x)
			require.Equal(t, readTestdata(t, "llmd/keys.txt"), dump(t, rdb), "pruned exactly as llm-d prunes")
			eval, evalsha := calls(t, rdb)
			require.Equal(t, tc.wantCalls, evalsha > 0, "EVALSHA calls: %d", evalsha)
			require.Equal(t, tc.wantEval, eval > 0, "EVAL calls: %d", eval)

			// Once EVAL has loaded them again, prunes go by EVALSHA only.
			applyFixture(t, x)
			eval2, evalsha2 := calls(t, rdb)
			require.Equal(t, eval, eval2, "no further EVAL")
			require.Greater(t, evalsha2, evalsha)
			require.Equal(t, readTestdata(t, "llmd/keys.txt"), dump(t, rdb))
		})
	}
}

// Evict prunes the emptied block hash and engine set by EVALSHA after a flush too.
func TestEvictAfterScriptFlush(t *testing.T) {
	srv := startOwnRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr})
	t.Cleanup(func() { _ = rdb.Close() })
	x := newIndex(t, rdb)
	entry := redisindex.Entry{Server: "pod-z", Tier: redisindex.DefaultTier}
	require.NoError(t, x.Add(ctx, []uint64{7}, []uint64{70}, []redisindex.Entry{entry}))
	require.EqualValues(t, 2, rdb.DBSize(ctx).Val(), "the block's hash and its engine set")
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	require.NoError(t, x.Evict(ctx, []uint64{7}, []redisindex.Entry{entry}))
	require.Zero(t, rdb.DBSize(ctx).Val(), "the hash and the engine set are gone")
	eval, evalsha := calls(t, rdb)
	require.Equal(t, 2, eval, "both prunes fell back to EVAL once")
	require.Equal(t, 2, evalsha)
}
