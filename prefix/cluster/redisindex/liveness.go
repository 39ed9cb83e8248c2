package redisindex

import (
	"context"
	"slices"
	"strings"
	"time"
)

// Redis 7.0 cannot expire one field of a hash (HEXPIRE came in 7.4), and llm-d's layout
// keeps a server's entries as fields of shared hashes, so entries cannot simply time out.
// The liveness rule is the router's instead: every message from a server (a batch, a
// heartbeat) marks it seen; Sweep clears, with Clear, every server not seen for the
// given time. Clear is idempotent, so every router replica may sweep. The clock is the
// caller's: tests pass logical times.

// Seen records that server was heard from at now.
func (x *Index) Seen(server string, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if t, ok := x.seen[server]; !ok || now.After(t) {
		x.seen[server] = now
	}
}

// Sweep clears every server last seen before now minus ttl and forgets it, and returns
// their names, sorted. A server cleared is seen again by its next message.
func (x *Index) Sweep(ctx context.Context, now time.Time, ttl time.Duration) ([]string, error) {
	x.mu.Lock()
	var dead []string
	for s, t := range x.seen {
		if now.Sub(t) > ttl {
			dead = append(dead, s)
		}
	}
	x.mu.Unlock()
	slices.Sort(dead)
	for i, s := range dead {
		if err := x.Clear(ctx, s); err != nil {
			return dead[:i], err
		}
		x.mu.Lock()
		if now.Sub(x.seen[s]) > ttl { // not seen again meanwhile
			delete(x.seen, s)
		}
		x.mu.Unlock()
	}
	return dead, nil
}

// CheckRestart reports whether the Redis server restarted (its run_id changed) since New
// or the previous check. A Redis that restarted without persistence has lost the index:
// the caller should replay its event streams from their start (a JetStream consumer can).
func (x *Index) CheckRestart(ctx context.Context) (bool, error) {
	id, err := x.serverRunID(ctx)
	if err != nil {
		return false, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if id == x.runID {
		return false, nil
	}
	x.runID = id
	x.stats.Restarts++
	return true, nil
}

func (x *Index) serverRunID(ctx context.Context) (string, error) {
	ctx, cancel := x.ctx(ctx)
	defer cancel()
	cmd := x.rdb.Info(ctx, "server")
	if err := cmdErr(cmd); err != nil {
		return "", err // ErrRefused if Redis refused INFO (NOPERM), else ErrUnavailable
	}
	for line := range strings.Lines(cmd.Val()) {
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", nil
}

func sortStrings(s []string) { slices.Sort(s) }
