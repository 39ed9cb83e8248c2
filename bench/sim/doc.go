// Package sim is the fragmentation simulator: it runs the same requests through
// contiguous reservation (the Orca schemes of the PagedAttention paper) and through this
// library's paged blocktable.Manager, under one iteration-level scheduler, and measures how
// the KV memory is used. The command `kvpage sim` (bench/cmd/kvpage) is its front end.
//
// # Requests
//
// A Request has a prompt (Input tokens), an output (Output tokens), an arrival time, and
// optionally a prefix group: its first Shared tokens (prompt first, then output) are the
// group's token stream, identical in every member (a system prompt, a conversation's
// history). The group's stream may itself begin with a wider group's (Base, BaseShared: the
// system prompt a conversation starts with). A request may follow an earlier one (After):
// it arrives only once that one has finished, as a conversation's next turn waits for the
// previous reply. Token ids are synthetic (see Token): the prefix index only needs to tell
// shared blocks from private ones. A request holds at most KVLen = Input + Output - 1
// token states: the last output token is returned, never fed back.
//
// Requests come from a built-in Workload or from a trace file (ParseTrace: CSV with a
// header, the Azure LLM inference trace, JSONL, ShareGPT JSON). Prepare fits a trace to a
// max-model-len as vLLM does: a prompt with no room for one output token is rejected, a
// longer output is capped; both are counted.
//
// # Built-in workloads
//
// Every draw comes from one bench.SplitMix64 seeded with the seed, in the order stated.
// LN(m, s) is a lognormal with mean m and sigma s (mu = ln m - s^2/2), drawn by
// Box-Muller from two Unit() draws (u1 = 1 - Unit(), u2 = Unit(),
// z = sqrt(-2 ln u1) cos(2 pi u2)), rounded to the nearest integer, at least 1. The means
// of ShareGPT and Alpaca are the PagedAttention paper's; the lognormal shapes and sigmas
// are this simulator's assumption.
//
//   - sharegpt: per request, input ~ LN(161.31, 1.0), then output ~ LN(337.99, 1.0); no
//     shared prefixes; max-model-len 2048.
//   - alpaca: per request, input ~ LN(19.31, 0.5), then output ~ LN(58.45, 0.5); no shared
//     prefixes; max-model-len 2048.
//   - longchat: conversations of T = 2 + Next()%5 turns; per conversation T, then per turn
//     the user message (turn 1: a document ~ LN(3000, 0.5); later turns ~ LN(100, 1.0)) and
//     the reply ~ LN(300, 1.0). Turn k's prompt is every earlier message and reply plus its
//     own message; the whole turn is the conversation's shared stream. Requests are ordered
//     by turn, then conversation; conversations are generated until there are n requests
//     (the last one cut short); max-model-len 16384.
//   - sysprompt: first 16 system prompts of 200 + Next()%601 tokens; then per request a
//     bench.Zipf(16, 1.1) choice, a user message ~ LN(161.31, 1.0) and an output
//     ~ LN(337.99, 1.0); input = system prompt + message, the system prompt shared by its
//     group; max-model-len 2048.
//   - conversation: the eviction benchmark's multi-turn chat trace (bench.NewConvTrace),
//     draw for draw. First 8 system prompts of 1024 tokens, each taking 1024 Next() draws
//     (the benchmark's token ids, unused here). A conversation opens by drawing its system
//     prompt, a bench.Zipf(8, 1.1) choice, then its turns T = 2 + Next()%9. 48 open first;
//     then per request: the open conversation at index Next()%48 (open conversations kept
//     in opening order), its user message U = 16 + Next()%241 tokens (then U draws
//     skipped), its reply R = 32 + Next()%481 tokens (then R draws skipped). A turn's prompt
//     is the system prompt, every earlier message and reply of its conversation, and its
//     message, so turn k's prompt begins with turn k-1's prompt and output. A conversation
//     that has sent T turns closes and the next one opens at the end of the list;
//     conversations open until there are n requests (the benchmark stops after 1,000, so
//     with seed 42 its 5,923 requests and this workload's agree on the first 5,727). The
//     system prompt is Base (shared by every conversation that drew it), the whole turn
//     the conversation's group stream, and turn k follows turn k-1 (After): it arrives
//     when turn k-1 has finished, and later requests wait for it. That keeps the trace's
//     interleaving of 48 open conversations, as the benchmark replays it, instead of
//     letting a turn run beside the turn whose reply it resends (impossible in a real chat)
//     or jump the queue as soon as that reply exists (which would hand it the blocks just
//     released and leave nothing for an eviction policy to decide). The price is that
//     arrivals, not memory, often limit the batch: with enough memory only a few turns run
//     at once. max-model-len 16384 (the longest turn is 1024 + 10 x 768 = 8,704).
//
// Arrivals are all at time 0 unless WithPoissonArrivals draws exponential gaps from a
// second generator seeded with seed+1; a request that follows another (After) arrives no
// earlier than that one's finish either way.
//
// # Scheduler
//
// One loop drives every scheme, step by step, as vLLM's continuous batching does:
//
//  1. Requests whose arrival time has come (floor(arrival / StepDuration) <= step) join
//     the waiting queue, in trace order. A request that follows another (After) arrives
//     no earlier than the step after that one finishes, and no later request arrives
//     before it: the trace's order is kept, so what ran between two turns of a
//     conversation in the trace runs between them here too.
//  2. Decode: every running request, oldest admission first, gets a slot for the token it
//     generated last step. A paged request that cannot get a block makes the scheme
//     preempt (recompute mode: the victim's KV is dropped and it waits, first in line,
//     to be admitted again with its prompt and the tokens it had generated).
//  3. Admission, first come first served: the head of the queue is admitted if the
//     running requests are fewer than MaxNumSeqs, its prefill (the prompt, less any
//     prefix hit) fits what the step's MaxNumBatchedTokens leaves after the decodes, and
//     the scheme finds memory for it. The first request that does not fit stops
//     admission: nobody overtakes.
//  4. Measure: the memory is split into parts (Usage) at this moment, when the step's
//     forward pass would use it.
//  5. Every running request generates one token; a request that has generated Output
//     tokens finishes and releases its memory.
//
// # Schemes
//
// OrcaMax, OrcaPow2 and OrcaOracle reserve, at admission, one contiguous region of
// MaxModelLen, the next power of two of KVLen (at most MaxModelLen), or exactly KVLen
// token slots, carved from one arena of Capacity slots by first fit (lowest address);
// a freed region merges with free neighbours. Their reservation covers the request's whole
// life, so they never preempt. Paged allocates blocks of BlockSize tokens on demand through
// blocktable.Manager over a blocks.Pool of Capacity/BlockSize blocks (one of them the null
// block), optionally with a prefix.Index (PrefixSharing) whose eviction policy and the
// Manager's preemption policy come from package evict by name. Hybrid runs a hybrid
// model preset (Scheme.Model: gpt-oss, Gemma 3, Llama 4 Scout, Qwen3-Next, Jamba) through
// blocktable/hybrid's Manager under one of three memory layouts (Scheme.Layout: uniform
// pages as vLLM, one pool per page size, pages carved from one pool as Jenga), its byte
// budget Capacity tokens of the model's attention layers, and reports each KV-cache
// group's share of the budget (Result.Groups) beside the hit rate; see Hybrid.
//
// Paged and Hybrid with PrefixSharing can have lower tiers (Scheme.Tiers: host and disk
// capacities in blocks for paged, in bytes for hybrid, split across its layout's pools in
// proportion to their device budgets; bandwidths; tiers.go): blocks are written through to the host
// as they are committed and back to disk as the host evicts them, an admission loads what
// the tiers hold past its device hit. Every transfer succeeds, and takes time on the step
// clock at its tier's bandwidth (tierlinks.go: one queue per tier's link, shared by the
// hybrid scheme's pools, a request waits for its loads before decoding, device blocks stay pinned until their copies end;
// a bandwidth of 0 is unlimited, every copy confirmed at once). Loaded tokens count as
// prefix hits, once per token however many groups loaded it; Result.Tiers gives each
// tier's hit rate and tokens, blocks and bytes moved, plans and
// link utilization over the whole run and the mean load wait, and WriteCharts draws
// tiers.png.
//
// A new scheme is one file: an implementation of the allocator interface (scheduler.go:
// admit, grow, finish, usage, check) that keeps its own per-request state, registered by
// name with registerScheme from init (scheme.go); Scheme.Name then selects it, --schemes
// accepts it, and the scheduler and every output stay as they are. A new eviction or preemption policy belongs in package evict: once its
// registry knows the name, --eviction and --preemption accept it.
//
// # Measurements
//
// Every step's Usage splits the budget exactly: Tokens + Reserved + Internal + External
// + Free = Capacity.
//
//   - Tokens: slots holding a running request's token state; a shared block counts once.
//   - Reserved: slots reserved that the request will fill before it finishes (contiguous
//     schemes: the rest of its true length KVLen).
//   - Internal fragmentation: slots allocated to a request that hold nothing now.
//     Contiguous schemes: the reservation beyond KVLen, which is never filled. Paged: the
//     empty tail of each request's last block (counted here even though the request may
//     still fill it, as the paper counts paging's waste).
//   - External fragmentation: free memory too small to use. Contiguous schemes: free holes
//     smaller than the reservation of the request at the head of the waiting queue (0 when
//     nobody waits). Paged: Capacity - usable blocks x BlockSize, the leftover that makes
//     no whole block plus the null block.
//   - Free: the rest. With prefix sharing, cached blocks that no running request holds are
//     free (the pool reclaims them on demand); Cached reports them.
//
// A Result averages the shares over the saturated phase: from step 0 through the step
// at which the waiting queue first empties after the last arrival (for a trace that
// arrives all at once, simply when the queue first empties), so the drain at the end,
// when memory empties and no scheme is under pressure, does not dilute the comparison.
// Mean and peak running requests, completions per 1,000 steps, preemptions and the prefix
// hit rate (hit tokens / prompt tokens of first admissions) are over the same steps.
// Readmissions after preemption are counted apart (Result.ResumedHitRate), as vLLM counts
// preempted requests' lookups apart: their re-hits are mostly their own blocks. With too few requests for the memory the phase is short and mostly the
// ramp-up at the start; Result.SaturatedSteps says how long it was, and
// Result.ShortPhase (marked "!" in the table, short_phase and a warning in the JSON) flags
// a phase shorter than ShortPhaseLifetimes mean request lifetimes.
//
// # Retention replays
//
// ReplayAgentic, ReplayFlood and ReplayQueue replay three workloads at the level of the
// cache (retention.go): each request runs through a blocktable.Manager at once (Admit, one
// Append of its reply, Finish), one at a time, so that what differs between runs is only
// what the cache keeps. Before each event the shared logical clock is set to event << 20,
// so retention durations count in events. Draws come from one bench.SplitMix64 seeded
// with Seed, in the order stated; U[a, b] is a + Next() % (b - a + 1); "p%" is
// Next() % 100 < p. Private tokens are ids above 128,000 used once.
//
//   - agentic (AgenticParams, DefaultAgentic): SystemPrompts system prompts of
//     SystemTokens tokens (group g's stream, see Token). Sessions sessions, at most
//     Concurrent open at once; an event first opens sessions up to Concurrent (each:
//     system prompt Next() % SystemPrompts, then turns U[TurnsMin, TurnsMax], first turn
//     due now), then runs every open session whose turn is due, in opening order: the
//     prompt is the session's context plus U[ToolMin, ToolMax] private tokens (a tool's
//     output or a user message), then the reply is U[ReplyMin, ReplyMax] private tokens;
//     the context becomes prompt and reply. After a turn that is not the last, the pause
//     is long with LongPausePercent% (U[LongPauseMin, LongPauseMax] events) or short
//     (U[ShortPauseMin, ShortPauseMax]). Then, with BackgroundPercent%, one one-shot
//     request of U[BackgroundMin, BackgroundMax] private tokens. The cache has Blocks
//     blocks of BlockSize. Schemes: lru and s3fifo (the policy alone); session (policy
//     priority, and each turn but the last ends with Manager.FinishTurn holding the
//     context at prefix.SessionPriority for SessionTTL events; the last releases it);
//     pinned (lru, each system prompt pinned after it is first computed, budget all of
//     them); session+pinned. Figures: the agents' token hit rate; recomputed tokens, the
//     full blocks of a turn's previous context that missed; pause survival, the share of
//     resumed turns whose whole previous context hit, by pause class.
//   - flood (FloodParams, DefaultFlood): two tenants (cache salts "victim" and "flood"),
//     eviction policy Policy (LRU by default). Each of Events events: with VictimPercent%, a victim request: document
//     Zipf(Documents, 1.1) of DocumentTokens tokens then U[QuestionMin, QuestionMax]
//     private tokens; then FloodPerEvent flood requests of U[FloodMin, FloodMax] private
//     tokens. Run without and with prefix.Index.SetQuota(flood, FloodQuota).
//   - queue (QueueParams, DefaultQueue): the sysprompt workload's first Requests
//     requests (seed Seed, prompts capped at 4,096 tokens, no replies) arrive through a
//     waiting queue: each step, 40 slots each bring the next request with probability
//     ArrivalsPer10/400 (a second SplitMix64 seeded Seed + 7), then the first
//     AdmitPerStep requests of the queue in the order under test (FCFS, or
//     prefix.QueueOrder) are admitted and finished. Figures: token hit rate, longest and
//     mean wait (steps from arrival to admission). LRU, Blocks blocks.
//
// The kvpage command runs the first two as `kvpage sim --workload agentic` and
// `kvpage sim --workload two-tenant` (--num-prompts: sessions or events; --kv-budget-tokens
// and --block-size: the cache; --eviction: the policies; --retention, --session-ttl and
// --flood-quota: the rows), printing the same figures as these functions return.
//
// # Fleets
//
// SimulateFleet runs a trace over FleetConfig.Servers servers behind one router. Each
// server is the paged scheme with prefix sharing under the scheduler above, its prefix
// index hashing blocks as vLLM does (vllmhash, seed FleetSeed) and reporting its events to
// a kvevents.Batcher. After every step each server's batch is encoded (vLLM's msgpack) and
// queued; at the start of the step EventDelay steps later the router decodes it and applies
// it to its cluster.ClusterIndex. Every request is routed when it arrives (its arrival step,
// and for a conversation's turn once the previous turn finished) by a cluster.Router with
// the policy named by FleetConfig.Policy; the load a policy sees is the router's own count
// of each server's outstanding requests (routed, not finished). A FleetResult gives the
// servers' prefix-hit rate, the hit the router expected, the load imbalance (the most
// outstanding requests on one server over the mean, averaged over busy steps),
// preemptions, and requests completed per step while requests arrive. With
// FleetConfig.Publish the batches go over a real transport instead (the smoke test uses
// NATS JetStream). The command `kvpage fleet-sim` sweeps fleet sizes and policies.
//
// # Errors
//
// Bad input returns an error wrapping ErrBadTrace (with a *TraceError naming the line and
// field) or ErrInvalidConfig, to be tested with errors.Is; nothing is skipped silently.
//
// # Concurrency and invariants
//
// Simulate is deterministic (logical steps, seeded generators, ties broken by ID) and
// runs on the calling goroutine; Compare runs schemes in parallel, each on its own state,
// so the results do not depend on the parallelism. Under -race or -tags kvinvariants every
// step checks that the Usage adds up to the capacity, and, sampled, that the arena's holes
// and reservations tile it, that the pool, the Manager and the simulator agree on every
// block, and the Manager's own invariants; a violation panics, as it is a bug.
package sim
