package redisindex

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// replyErr is a reply error as go-redis returns them (redis.Error).
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// A reply of a Redis in a state that passes is ErrUnavailable (retry later), never
// ErrRefused (which a caller may take for good); every other reply error is ErrRefused,
// never ErrUnavailable. Both name the command and keep Redis's reply reachable; the code
// is the reply's first word, so BUSYKEY and BUSYGROUP are not BUSY.
func TestTransientStatesAreUnavailable(t *testing.T) {
	for _, tc := range []struct {
		reply     string
		transient bool
	}{
		{"LOADING Redis is loading the dataset in memory", true},
		{"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.", true},
		{"TRYAGAIN Multiple keys request during rehashing of slot", true},
		{"CLUSTERDOWN The cluster is down", true},
		{"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", true},
		{"BUSYKEY Target key name already exists.", false},
		{"BUSYGROUP Consumer Group name already exists", false},
		{"READONLY You can't write against a read only replica.", false},
		{"OOM command not allowed when used memory > 'maxmemory'.", false},
		{"NOPERM this user has no permissions to run the 'hkeys' command", false},
		{"ERR unknown command", false},
		{"LOADINGX not a state", false},
	} {
		t.Run(tc.reply, func(t *testing.T) {
			ctx := context.Background()
			ok := redis.NewCmd(ctx, "hset", "req:1", "f", "v")
			ok.SetVal(int64(1))
			failed := redis.NewCmd(ctx, "hkeys", "req:2")
			failed.SetErr(replyErr(tc.reply))
			for _, err := range []error{cmdErr(failed), execErr([]redis.Cmder{ok, failed}, replyErr(tc.reply))} {
				if tc.transient {
					require.ErrorIs(t, err, ErrUnavailable)
					require.NotErrorIs(t, err, ErrRefused)
				} else {
					require.ErrorIs(t, err, ErrRefused)
					require.NotErrorIs(t, err, ErrUnavailable)
				}
				require.ErrorContains(t, err, "hkeys req:2: "+tc.reply)
				var rerr redis.Error
				require.ErrorAs(t, err, &rerr, "Redis's reply stays reachable")
			}
		})
	}
}
