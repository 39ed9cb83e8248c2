// Package cluster is the router's side of KV-aware routing: an index, fed with the KV
// events of every server of a fleet, that answers which server holds the longest cached
// prefix of a prompt (what llm-d's KV-cache indexer and Dynamo's router do). It needs no
// transport: feed it decoded batches (package kvevents) from any source, for example a
// subscriber of package kvevents/zmq, or a fleet simulation.
//
// Index is the interface every backend implements (Apply a server's batch; Match a
// prompt); ClusterIndex is the in-memory one. Blocks are keyed, per server, by the 64-bit
// form of their hash, as llm-d keys them, and held per KV-cache group (vLLM's group_idx)
// so that a hybrid model's sliding-window removals do not hide its full-attention blocks; a lookup hashes the prompt's full blocks with the
// servers' hasher (for vLLM servers, vllmhash.NewSHA256CBOR with their PYTHONHASHSEED, or
// vllmhash.NewSHA256CBORDefault when they run without one) and walks them from the first.
// Because a block hash commits to the whole prefix before it,
// a block's key alone says where in which prefix it sits; no tree is needed.
//
// # Routing
//
// Router turns a lookup into a choice: each candidate server gets its cached prefix
// (Candidate.Cached, and Offloaded for slower tiers once the index knows tiers) and the
// caller's load figure, and a Policy chooses: RoundRobin, LeastLoaded, PrefixAware, or
// PrefixLoad, which scores Weight·(Cached + OffloadedWeight·Offloaded)/promptBlocks −
// (1−Weight)·Load/maxLoad. A new policy implements Policy (deterministic, ties to the
// earliest candidate). Routers work over any Index, in memory or in Redis.
//
// # Concurrency
//
// An Index is safe for concurrent use. ClusterIndex guards its state with one mutex, which
// a lookup takes only after hashing the prompt (lookups hash one at a time). A
// Router and RoundRobin belong to one goroutine each.
//
// # Invariants
//
// Every server's block count is the size of its block set; servers are listed sorted by
// name, and ties in a lookup go to the first name.
//
// # Extending
//
// A new backend (a shared store) goes in a subpackage (as redisindex) implementing Index,
// with the state-machine test of this package run against it.
package cluster
