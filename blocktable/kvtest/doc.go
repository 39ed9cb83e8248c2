// Package kvtest is the test kit for schedulers built on kvpage: it builds a small pool,
// prefix index and Manager inside a test and fails the test when a block leaks or an
// invariant breaks. It imports the whole stack and sits below blocktable as
// net/http/httptest sits below net/http; only tests import it. It forces no assertion
// library on its users: everything takes a TB, the four methods of testing.TB it needs.
//
// # The stack in a test
//
// New builds the stack of a Config (17 blocks of 4 tokens by default) and registers a
// cleanup that runs when the test ends: it checks the invariants of pool, index, tables
// and Manager (every block's refcount equals its number of holders), then that every
// block is back in the pool or the prefix index and no sequence is left running or
// swapped. A leak report names, for every block still held, the sequences that held it
// ("block 3: refcount 2, held by r1, r2"); Env.Seq gives sequences readable names.
//
// The Env also holds:
//   - Clock, the one deterministic logical clock of the index and the Manager;
//   - Log, every decision in order: eviction victims (RecordingPolicy wraps a named
//     policy), evicted batches, resets, preemption choices (RecordingPreemption wraps the
//     preemption policy, with every candidate as the policy saw it);
//   - fault injection for out-of-memory paths: FailAllocation(k) makes the k-th allocation
//     from now fail once, Shrink(n) makes the pool report n fewer blocks, Heal undoes both
//     (the hooks are blocks.Faults);
//   - Dump and WriteState, a deterministic, diffable text of the whole state (free list in
//     hand-out order, refcounts, the prefix tree with last-access times and eviction
//     order, every table and cursor) for golden files (CheckGolden) and as a deep snapshot
//     that a failed call must leave unchanged.
//
// # Scenarios
//
// RunFiles and RunFile run scenario files: a small command language, one command a line,
// each followed by "----" and the output expected, the last line of which is the state
// after the command, in the spirit of pebble's data-driven tests:
//
//	admit r1 ns=a prompt=0..47
//	----
//	ok hit=0 new=12 tokens=48
//	state free=4 evictable=0 held=12 cached=12 seqs=1
//
//	expect free=4 r1.hit=0
//
// Runner documents every command (admit, append, fork, finish, abort, truncate, preempt,
// swapin, evict, reset, tick, fail-alloc, shrink, heal, table, slots, log, stats, dump,
// explain, expect). explain prints why a prompt's lookup stops (a prefix.MissReason) and
// expect reads it back (miss, miss.cause, miss.matched), with the counters of resumed
// admissions (resumed, rehits) and pins (pinned); in Go, Env.Explain and Env.ExpectMiss
// do the same. Running the tests with -kvtest.rewrite rewrites the expected outputs (and the
// values of expect lines) with the actual ones, to review as a diff.
//
// # Example: testing a toy scheduler
//
// A scheduler under test takes the Env's Manager. This one (toy_scheduler_test.go in
// this package) admits waiting requests while they fit, decodes one token per running
// sequence per step, and on ErrOutOfBlocks preempts the newest other sequence
// (recompute mode, back to the head of the queue) and retries:
//
//	func TestToyScheduler(t *testing.T) {
//		// 8 usable blocks of 4 tokens: three requests of 12 + 8 tokens cannot all run at once.
//		env := kvtest.New(t, kvtest.Config{Blocks: 9, BlockSize: 4})
//		s := &toyScheduler{m: env.Manager}
//		for _, name := range []string{"r1", "r2", "r3"} {
//			s.Submit(env.Seq(name), kvtest.MustTokens("0..11"), 8) // one shared prompt
//		}
//		env.FailAllocation(4) // and the 4th allocation fails: the OOM path must cope
//
//		for s.Busy() {
//			if err := s.Step(); err != nil {
//				t.Fatal(err)
//			}
//			if err := env.Check(); err != nil { // refcounts = holders, conservation
//				t.Fatalf("step %d: %v\n%s", s.steps, err, env.Dump())
//			}
//			if s.steps > 100 {
//				t.Fatalf("no progress:\n%s", env.Dump())
//			}
//		}
//
//		if env.Faults().Tripped != 1 {
//			t.Errorf("the injected failure was not delivered")
//		}
//		if len(env.Preemptions.Choices()) == 0 {
//			t.Errorf("the scheduler never had to preempt:\n%s", env.Log)
//		}
//		if st := env.Manager.Stats(); st.Finished != 3 || st.HitTokens == 0 {
//			t.Errorf("finished %d, prefix hits %d tokens; want 3 and some", st.Finished, st.HitTokens)
//		}
//		// Nothing else to do: when the test ends, the kit fails it if any block is still
//		// held (naming the sequences that held it) or any invariant is broken.
//	}
//
// Had the scheduler forgotten to finish a sequence it preempted and readmitted, or
// retried an admission after a failed one without noticing it succeeded, the test would
// fail at its end with the blocks and the sequences holding them.
//
// # Hybrid models
//
// NewHybrid builds a blocktable/hybrid Manager (a model with several KV-cache groups in
// one pool: full attention, sliding window, Mamba state...) with the same end-of-test
// checks: HybridEnv.Check verifies every group's invariants, that no block sits in two
// groups' tables, and conservation (free + evictable + held = capacity, per-group cached
// counts), and at the end every block must be back in the free queue, free or cached and
// evictable; a leak report names the sequence and the group holding each block
// ("block 5: refcount 1, held by r2 (group 0)"). Preemption decisions are logged as for
// Env. The scenario language drives the single-group Manager only.
//
// # Reliability of the module itself
//
// This package's own tests are the whole-system proof that nothing leaks: a state-machine
// test drives random admit, append, commit, fork, truncate, finish, abort, preempt,
// readmit, evict and reset across many sequences and four namespaces against a reference
// model, checking after every step that free + evictable + held = capacity and that every
// refcount equals its number of holders (100,000 operations in CI; -kvtest.ops=5000000
// for more); a bad-input table calls every exported mutating method of Pool, Index, Table
// and Manager with each kind of invalid argument and requires a typed error and an
// unchanged dump; FuzzScenario fuzzes the scenario language. Under the kvinvariants build
// tag (and -race) the stack re-checks its invariants after every mutation, sampled, and
// poisons freed metadata (see internal/invariant).
//
// # Extending the kit
//
// A new end-of-test check belongs in Env.Check (env.go) when it is an invariant that holds
// at every step, or in CheckLeaks (leak.go) when it holds only once the test is done, and
// in the same method of HybridEnv (hybrid.go) when it applies to hybrid stacks too; the
// cleanup New and NewHybrid register runs both. A new Config or HybridConfig field is
// checked in Validate (config.go, hybrid_config.go) with a case in its test. A new
// scenario command is a method of Runner in commands.go, registered in runner.go's command
// table and documented on Runner.
//
// # Concurrency
//
// An Env is not safe for concurrent use, like the stack it holds: one test goroutine
// drives it.
//
// # Invariants
//
// Env.Check verifies, at any point, the Manager's CheckInvariants (pool, index, tables,
// refcounts equal holders) and block conservation: Free + Evictable + Held = Capacity.
// Faults never break them: they change what the pool reports and hands out, not its
// structure.
package kvtest
