package redisindex

import (
	"errors"

	"github.com/kvpage/kvpage/internal/argerr"
)

// The errors the index returns; each is recognised by errors.Is.
var (
	// ErrBlockSize: a block size outside [1, MaxBlockSize].
	ErrBlockSize = errors.New("redisindex: block size out of range")
	// ErrInvalid: an argument that cannot be stored (no keys, no entries, an empty or
	// oversized server name, a negative group). It matches (errors.Is)
	// blocks.ErrInvalidArgument and every other package's invalid-argument sentinel, and
	// they match it.
	ErrInvalid = argerr.New("redisindex: invalid argument")
	// ErrTooLarge: a batch or a prompt over the configured bounds; nothing was written.
	ErrTooLarge = errors.New("redisindex: over the configured bound")
	// ErrUnavailable wraps every failure to talk to Redis (connection refused, reset,
	// deadline) and every reply of a Redis in a state that passes (LOADING after a
	// restart, BUSY running a script, TRYAGAIN, CLUSTERDOWN, MASTERDOWN; the error names
	// the command): retry later. Writes are idempotent: applying the same batch again once
	// Redis is back leaves the index as one application would have.
	ErrUnavailable = errors.New("redisindex: redis unavailable")
	// ErrRefused: Redis answered a command with an error that retrying does not mend
	// (WRONGTYPE on a key another application holds, OOM at maxmemory: ErrOutOfMemory,
	// READONLY on a replica: ErrReadOnly, NOPERM); the error names the command and its
	// key. It never wraps
	// ErrUnavailable, so a caller may treat it as needing an operator. As after
	// ErrUnavailable, part of the call may be applied, and applying it again once the
	// cause is gone is safe.
	ErrRefused = errors.New("redisindex: redis refused a command")
	// ErrReadOnly: Redis answered READONLY, a write sent to a replica: the client points
	// at one, or a failover demoted the master it was pointed at. Re-resolve the master
	// (Sentinel, the cluster's slots) before writing again; retrying the same address does
	// not mend it. It matches ErrRefused too (errors.Is), so a caller that only tells a
	// refusal from ErrUnavailable need not change.
	//
	// How long a write tries first is the caller's client options, which the index does
	// not override (see the package doc's Retries).
	ErrReadOnly error = &refusal{"redisindex: redis refused a command: read-only replica"}
	// ErrOutOfMemory: Redis answered OOM, a write over maxmemory that its
	// maxmemory-policy (noeviction, or a volatile-* policy with no key to evict) refuses.
	// Reads still work; writes do once memory is freed or maxmemory raised. It matches
	// ErrRefused too (errors.Is).
	ErrOutOfMemory error = &refusal{"redisindex: redis refused a command: out of memory (maxmemory)"}
)

// refusal is a kind of ErrRefused a caller may want to tell apart: errors.Is matches it
// and ErrRefused.
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }

// Is makes a refusal match ErrRefused.
func (e *refusal) Is(target error) bool { return target == ErrRefused }

// Bounds on what the index stores or reads back.
const (
	// MaxBlockSize is the largest block size in tokens.
	MaxBlockSize = 1 << 16
	// MaxFieldBytes bounds a hash field read back; longer fields are skipped.
	MaxFieldBytes = 1024
	// MaxServerName bounds a server identifier.
	MaxServerName = 256
)
