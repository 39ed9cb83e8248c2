// Package redisindex keeps a router's cluster index in Redis, in the layout of llm-d's
// KV-cache indexer (llm-d-kv-cache, pkg/kvcache/kvblock/redis.go at commit 7be76e1), so
// that kvpage routers and llm-d's scheduler can share one Redis, and any number of router
// replicas share what they learnt and keep it across their restarts. Valkey speaks the
// same protocol and works unchanged (point the client at it); the tests run against
// redis-server.
//
// # Layout
//
// Blocks are named by request keys: llm-d's chained FNV-64a hashes of the block tokens
// (KeyHasher), which depend only on the tokens, the seed and the model, not on a server.
//
//   - "<request key>" (the decimal number) is a hash whose fields are the servers holding
//     the block: each field is llm-d's PodEntry as JSON, {"PodIdentifier":...,
//     "DeviceTier":...,"Speculative":...,"HasGroup":...,"GroupIdx":...}, with an empty
//     value (Entry). A server holding a block on two tiers, or in two KV-cache groups, has
//     two fields.
//   - "engine:<engine key>" is a sorted set mapping a server's own block hash (its 64-bit
//     form, as events carry it) to the request keys it covers, scored by position: what
//     BlockRemoved events and chained BlockStored events are resolved through.
//   - Two Lua scripts prune atomically: a block's hash once it has no field left, and an
//     engine set once every hash it maps to is empty. New loads them; writes send EVALSHA,
//     and EVAL only when Redis has lost them (NOSCRIPT).
//
// Lookup sends one pipelined HKEYS per request key: one round trip. A prompt's lookup
// (Match, MatchPrompt, MatchTokens) hashes and looks up its blocks in stages (256 blocks,
// then four times as many each time), the next only when the last was held throughout:
// a hit that ends early costs at most a stage past it, a whole hit of up to 16,384 blocks
// at most four round trips. Writes (Apply, Add, Evict) are pipelined too.
//
// # Liveness
//
// Redis 7.0 cannot expire a hash field, so a server that vanishes would be routed to
// forever. The router's liveness rule clears it instead: Seen marks a server heard from,
// Sweep clears (Clear, a SCAN of the keyspace) every server not heard from for a given
// time. Times are the caller's, so tests and simulations stay deterministic.
//
// # Hostile input, failures
//
// Batches come from the network: a batch of more blocks than Config.MaxBatchBlocks, an
// empty or over-long server name, are refused with a typed error before anything is
// written. What Redis returns is bounded too: fields over MaxFieldBytes or not entries are
// skipped, at most MaxEntriesPerBlock entries per block and MaxLookupBlocks blocks per
// lookup are read. Every call has a deadline (Config.Timeout). A failure to reach Redis
// returns an error wrapping ErrUnavailable, and so does a reply of a Redis in a state
// that passes (LOADING after a restart, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN): retry
// later. A command Redis answers with any other error (maxmemory, a replica, an ACL, a
// write onto a key another application holds) returns one wrapping ErrRefused that
// names the command, and never ErrUnavailable; a write to a replica (READONLY, after a
// failover) is also ErrReadOnly, and one over maxmemory (OOM) ErrOutOfMemory: no reply error is taken for an empty
// result, except a read of another application's key, which holds no entry. Every write
// is idempotent, so applying a batch again after the failure is safe. CheckRestart tells a Redis restart (a lost index
// without persistence) from a blip: replay the event stream then.
//
// # Retries
//
// The index retries nothing itself; the go-redis client the caller passes to New does,
// by its own options, and the index never overrides them. A write pipeline whose first
// reply is READONLY (a failover demoted the master), LOADING, TRYAGAIN, CLUSTERDOWN or
// MASTERDOWN, or which lost its connection, is sent again whole: 1+MaxRetries attempts in
// all (4 at go-redis's default of 3, 1 with MaxRetries -1), a backoff between
// MinRetryBackoff and MaxRetryBackoff (8 ms and 512 ms by default) before each retry, and
// none past the call's deadline (Config.Timeout, 2 s by default, or the caller's earlier
// one). A READONLY connection is closed first, so the next attempt dials again: a
// FailoverClient asks Sentinel for the master, a host name resolves again, a
// ClusterClient reloads its slots. That is what makes a retry worth having; a plain
// Client at a fixed address meets the same replica every time.
//
// For a router, whose routing decisions must not stall on a write: with a FailoverClient
// or a ClusterClient keep a few retries (the default 3 lets a failover that completes
// within the backoff heal unseen); with a plain Client set MaxRetries to -1, so that
// ErrReadOnly comes back after one attempt. Lookups are reads and never meet READONLY.
// A deadline that ends the backoff returns the reply Redis gave last, so a replica's
// READONLY is still ErrReadOnly; the deadline's error (ErrUnavailable) comes back only
// when no attempt got a reply. (TestReadOnlyAttemptsAreTheCallersMaxRetries counts the
// attempts on a real replica; TestReadOnlyUnderADeadlineThatEndsTheBackoff cuts them off.)
//
// # Concurrency
//
// An Index is safe for concurrent use. Its own state (the request-key hasher, the
// liveness table, counters) is under one mutex held for no network call; Redis is the
// shared state, and llm-d's layout is safe for concurrent writers through the scripts.
//
// # Differences from llm-d, none visible in Redis
//
// A batch's writes go in as few round trips as its reads allow, where llm-d sends several
// per event; the keys written are the same (a test compares them byte for byte with the
// keys llm-d's own code wrote from the same batches, and another reads those keys).
// Entries carry the KV-cache group: Apply writes an event's group_idx (kvevents.Event.Group)
// into the entry as llm-d's event pool does, and Add takes it from the caller. This package imports go-redis; the packages a
// server embeds (blocks, prefix, blocktable, evict) do not import it.
package redisindex
