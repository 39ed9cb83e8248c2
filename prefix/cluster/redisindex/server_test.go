package redisindex_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kvpage/kvpage/internal/testserver"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// testDB numbers this package's databases, apart from other packages' tests that share
// the CI server.
const testDB = 3

// client returns a client of the shared Redis (KVPAGE_REDIS_ADDR) on a flushed database.
func client(t testing.TB) *redis.Client {
	t.Helper()
	addr := os.Getenv("KVPAGE_REDIS_ADDR")
	if addr == "" {
		testserver.Need(t, "Redis", "KVPAGE_REDIS_ADDR")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, DB: testDB})
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, rdb.FlushDB(context.Background()).Err())
	return rdb
}

// ownRedis is a redis-server this test starts on a free port, for faults the shared
// server must not see (a restart).
type ownRedis struct {
	*testserver.Process
	addr string
}

func startOwnRedis(t *testing.T) *ownRedis {
	t.Helper()
	bin := testserver.Binary(t, "KVPAGE_REDIS_SERVER", "redis-server")
	port := testserver.FreePort(t)
	addr := "127.0.0.1:" + port
	p := testserver.Start(t, func() bool { return testserver.Listening(addr) },
		bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	return &ownRedis{Process: p, addr: addr}
}

// dump lists the keyspace as the fixture does: one sorted line per hash field
// ("hash KEY FIELD VALUE") and per sorted-set member ("zset KEY SCORE MEMBER").
func dump(t testing.TB, rdb *redis.Client) string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	var lines []string
	for _, k := range keys {
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "hash":
			m, err := rdb.HGetAll(ctx, k).Result()
			require.NoError(t, err)
			for f, v := range m {
				lines = append(lines, fmt.Sprintf("hash %s %s %q", k, f, v))
			}
		case "zset":
			zs, err := rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
			require.NoError(t, err)
			for _, z := range zs {
				lines = append(lines, fmt.Sprintf("zset %s %g %s", k, z.Score, z.Member))
			}
		default:
			lines = append(lines, "other "+k)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return string(b)
}
