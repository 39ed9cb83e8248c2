package redisindex

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The two scripts of llm-d's layout, written for this package (their behaviour is
// llm-d's, pkg/kvcache/kvblock/redis.go at 7be76e1): they run atomically in Redis, so a
// concurrent writer (another router replica, llm-d's scheduler) cannot add a pod to a
// hash between the check and the delete.

// pruneRequestKey deletes KEYS[1], a block's hash, when no entry is left in it.
const pruneRequestKey = `
if redis.call('HLEN', KEYS[1]) == 0 then
	redis.call('DEL', KEYS[1])
	return 1
end
return 0`

// pruneEngineKey deletes KEYS[1], an engine:<hash> sorted set, when every block hash it
// maps to (KEYS[2..]) is empty.
const pruneEngineKey = `
for i = 2, #KEYS do
	if redis.call('HLEN', KEYS[i]) > 0 then
		return 0
	end
end
redis.call('DEL', KEYS[1])
return 1`

// The scripts as go-redis Scripts: queued by EVALSHA, so that a pipeline carries each
// script's 40-byte SHA-1 instead of its body. New loads both (SCRIPT LOAD); a Redis that
// lost them since (a restart, SCRIPT FLUSH, a failover to a replica) answers NOSCRIPT, and
// exec reruns those calls with EVAL, which loads the script again.
var (
	pruneRequestScript = redis.NewScript(pruneRequestKey)
	pruneEngineScript  = redis.NewScript(pruneEngineKey)
)

// loadScripts puts both scripts in Redis's script cache: ErrRefused if Redis refuses
// SCRIPT LOAD (NOPERM, a script Redis cannot compile), ErrUnavailable if it cannot be
// reached.
func loadScripts(ctx context.Context, rdb redis.UniversalClient) error {
	for _, s := range []*redis.Script{pruneRequestScript, pruneEngineScript} {
		if err := cmdErr(s.Load(ctx, rdb)); err != nil {
			return err
		}
	}
	return nil
}

// queuePrune queues script s over keys on pipe.
func queuePrune(ctx context.Context, pipe redis.Pipeliner, s *redis.Script, keys []string) {
	s.EvalSha(ctx, pipe, keys)
}

// exec executes pipe, then reruns with EVAL every EVALSHA of a prune script that Redis
// answered NOSCRIPT, and returns the error execErr makes of the whole.
func (x *Index) exec(ctx context.Context, pipe redis.Pipeliner) error {
	cmds, err := pipe.Exec(ctx)
	if err = execErr(cmds, err); err != nil {
		return err
	}
	for _, c := range cmds {
		if !redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			continue
		}
		s, keys, err := evalShaCall(c.Args())
		if err != nil {
			return err
		}
		if err := cmdErr(s.Eval(ctx, x.rdb, keys)); err != nil {
			return err
		}
	}
	return nil
}

// evalShaCall reads back the script and keys of a queued EVALSHA (its arguments are
// "evalsha", the SHA-1, the number of keys, the keys).
func evalShaCall(args []any) (*redis.Script, []string, error) {
	if len(args) < 3 {
		return nil, nil, fmt.Errorf("%w: NOSCRIPT for %v", ErrRefused, args)
	}
	var s *redis.Script
	for _, c := range []*redis.Script{pruneRequestScript, pruneEngineScript} {
		if args[1] == c.Hash() {
			s = c
		}
	}
	n, ok := args[2].(int)
	if s == nil || !ok || n < 0 || 3+n > len(args) {
		return nil, nil, fmt.Errorf("%w: NOSCRIPT for %v", ErrRefused, args[:2])
	}
	keys := make([]string, n)
	for i := range keys {
		if keys[i], ok = args[3+i].(string); !ok {
			return nil, nil, fmt.Errorf("%w: NOSCRIPT with key %v", ErrRefused, args[3+i])
		}
	}
	return s, keys, nil
}
