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
	// (WRONGTYPE on a key another application holds, OOM at maxmemory, READONLY on a
	// replica, NOPERM); the error names the command and its key. It never wraps
	// ErrUnavailable, so a caller may treat it as needing an operator. As after
	// ErrUnavailable, part of the call may be applied, and applying it again once the
	// cause is gone is safe.
	ErrRefused = errors.New("redisindex: redis refused a command")
)

// Bounds on what the index stores or reads back.
const (
	// MaxBlockSize is the largest block size in tokens.
	MaxBlockSize = 1 << 16
	// MaxFieldBytes bounds a hash field read back; longer fields are skipped.
	MaxFieldBytes = 1024
	// MaxServerName bounds a server identifier.
	MaxServerName = 256
)
