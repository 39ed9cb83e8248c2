package cluster

import (
	"github.com/kvpage/kvpage/internal/argerr"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// Index is what a KV-aware router keeps of a fleet's caches: it learns from each server's
// KV events which blocks the server holds, and answers, for a prompt, how many of its
// leading full blocks each server holds. ClusterIndex is the in-memory implementation; a
// backend that shares the index between routers (Redis, in llm-d's layout) implements the
// same interface, so routing code and subscribers work with either.
//
// Contract, for every implementation:
//   - Apply applies one batch of one server's events, in order. It is safe for concurrent
//     use, including with lookups, and never blocks a lookup for long. A batch is applied
//     whole or, on a returned error, possibly in part; batches are idempotent (stores and
//     removals of the same hashes), so a caller may apply a batch again after an error.
//   - Blocks are keyed by the 64-bit form of their hash (kvevents.ExternalHash.Uint64), per
//     server and KV-cache group (an event's group_idx, the groupless entry apart): a
//     server holds a block while any of its groups does. A lookup hashes the prompt's
//     full blocks with the servers' hasher.
//   - Match appends every known server's hit, the most blocks first, ties by name, and
//     returns the extended dst. An error means the index could not be read (a backend
//     that is down); the in-memory index never fails.
type Index interface {
	kvevents.Applier
	Match(dst []ServerHit, p *prefix.Prompt) ([]ServerHit, error)
}

// ServerHit is one server's answer to a lookup.
type ServerHit struct {
	Server string
	// Blocks is the number of leading full blocks of the prompt the server holds.
	Blocks int
}

// ErrInvalidArgument is wrapped by the errors returned for bad arguments: a nil hasher,
// a block size or a cap out of range, a nil batch. It matches (errors.Is)
// blocks.ErrInvalidArgument and every other package's invalid-argument sentinel, and they
// match it.
var ErrInvalidArgument = argerr.New("cluster: invalid argument")
