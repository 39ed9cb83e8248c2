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
// history). Token ids are synthetic (see Token): the prefix index only needs to tell
// shared blocks from private ones. A request holds at most KVLen = Input + Output - 1
// token states: the last output token is returned, never fed back.
//
// Requests come from a built-in Workload (Workloads documents each distribution exactly;
// all draw from bench.SplitMix64 with a seed) or from a trace file (ParseTrace: CSV with
// a header, the Azure LLM inference trace, JSONL, ShareGPT JSON). Prepare fits a trace to
// a max-model-len as vLLM does: a prompt with no room for one output token is rejected,
// a longer output is capped; both are counted.
//
// # Scheduler
//
// One loop drives every scheme, step by step, as vLLM's continuous batching does:
//
//  1. Requests whose arrival time has come (floor(arrival / StepDuration) <= step) join
//     the waiting queue.
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
// Manager's preemption policy come from package evict by name.
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
// hit rate (hit tokens / prompt tokens of admissions, readmissions included) are over the
// same steps. With too few requests for the memory the phase is short and mostly the
// ramp-up at the start; Result.SaturatedSteps says how long it was.
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
