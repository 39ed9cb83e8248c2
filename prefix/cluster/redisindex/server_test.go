package redisindex_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// needServer skips a test that needs a server a developer did not start, and fails it
// in CI (CI=true), where .ci/run starts one: a skipped integration test must not pass CI.
func needServer(t testing.TB, what, env string) {
	t.Helper()
	msg := fmt.Sprintf("%s not available: set %s (bash .ci/run starts one and sets it)", what, env)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// testDB numbers this package's databases, apart from other packages' tests that share
// the CI server.
const testDB = 3

// client returns a client of the shared Redis (KVPAGE_REDIS_ADDR) on a flushed database.
func client(t testing.TB) *redis.Client {
	t.Helper()
	addr := os.Getenv("KVPAGE_REDIS_ADDR")
	if addr == "" {
		needServer(t, "Redis", "KVPAGE_REDIS_ADDR")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, DB: testDB})
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, rdb.FlushDB(context.Background()).Err())
	return rdb
}

// ownRedis is a redis-server this test starts on a free port, for faults the shared
// server must not see (a restart).
type ownRedis struct {
	bin, dir, addr string
	cmd            *exec.Cmd
}

func startOwnRedis(t *testing.T) *ownRedis {
	t.Helper()
	bin := os.Getenv("KVPAGE_REDIS_SERVER")
	if bin == "" {
		bin, _ = exec.LookPath("redis-server")
	}
	if bin == "" {
		needServer(t, "redis-server binary", "KVPAGE_REDIS_SERVER or PATH")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	r := &ownRedis{bin: bin, dir: t.TempDir(), addr: addr}
	r.start(t)
	t.Cleanup(r.stop)
	return r
}

func (r *ownRedis) start(t *testing.T) {
	t.Helper()
	_, port, _ := net.SplitHostPort(r.addr)
	r.cmd = exec.Command(r.bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.dir)
	r.cmd.Stdout, r.cmd.Stderr = nil, nil
	require.NoError(t, r.cmd.Start())
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", r.addr, 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("redis-server on %s did not start", r.addr)
}

func (r *ownRedis) stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
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
