package kvtest

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
)

// TB is the part of testing.TB the kit uses. *testing.T, *testing.B and *testing.F satisfy
// it, and so does any test framework's handle that has these four methods: the kit forces
// no assertion library on its users.
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Config describes the stack New builds. The zero value is a small stack: 17 blocks (the
// null block and 16 usable) of 4 tokens, a prefix index with the built-in LRU, newest-first
// preemption, no lower tier.
type Config struct {
	// Blocks is the number of physical blocks, the null block included (default 17).
	Blocks int
	// BlockSize is the number of tokens per block (default 4).
	BlockSize int
	// NoNullBlock builds the pool without a reserved null block.
	NoNullBlock bool
	// NoIndex builds the Manager without a prefix index (no caching).
	NoIndex bool
	// HostBlocks, when positive, gives the index a host tier of that many blocks
	// (prefix.WithTiers, write-back, no demotion ahead of need), where Swap preemption
	// keeps its victims: Swap needs it. It needs the index (not NoIndex nor SlidingWindow).
	HostBlocks int
	// Eviction names an eviction policy of package evict ("lru", "fifo", "lfu", ...); it is
	// wrapped in a RecordingPolicy so that every victim is logged. "" keeps the index's
	// built-in LRU, whose evictions are logged from the index's events instead.
	Eviction string
	// EvictionPolicy, when set, builds the policy (wrapped in a RecordingPolicy) instead of
	// Eviction.
	EvictionPolicy evict.Factory
	// Preemption is the preemption policy (default evict.NewFCFSPreemption, the Manager's
	// own default order); it is wrapped in a RecordingPreemption.
	Preemption evict.Preemption
	// Observer, when set, also receives the index's events (after the kit's logger).
	Observer prefix.Observer
	// Watermark, SlidingWindow and FullPromptHit are passed to blocktable.Config. A
	// SlidingWindow builds the stack without a prefix index (as NoIndex), since
	// blocktable.New refuses a window with one (blocktable.ErrWindowWithIndex); NewHybrid
	// tests a sliding window with prefix caching.
	Watermark     float64
	SlidingWindow int
	FullPromptHit bool
}

// Env is a small pool, prefix index and Manager built inside a test, sharing one fake
// clock, with a decision log and fault injection. New registers a cleanup that fails the
// test on a broken invariant or on any block still held when the test ends.
//
// Env is not safe for concurrent use, like everything it holds.
type Env struct {
	// Pool is the device pool.
	Pool *blocks.Pool
	// Index is the prefix index (nil with Config.NoIndex).
	Index *prefix.Index
	// Manager is what the scheduler under test drives.
	Manager *blocktable.Manager
	// Clock is the one logical clock of the index and the Manager.
	Clock *Clock
	// Log receives every eviction and preemption decision.
	Log *Log
	// Evictions is the recording wrapper of Config.Eviction or EvictionPolicy (nil with
	// the built-in LRU); Preemptions wraps the preemption policy.
	Evictions   *RecordingPolicy
	Preemptions *RecordingPreemption

	tb     TB
	cfg    Config
	faults *blocks.Faults
	seqNames
}

// New builds the stack of cfg for one test and registers, with tb.Cleanup, the end-of-test
// check: the invariants of pool, index, tables and Manager (every refcount equals its
// number of holders), then the leak check (every block back in the pool or in the index,
// no sequence left running or swapped). A failure names the sequences that held each
// leaked block. New fails the test at once (Fatalf) on a bad Config.
func New(tb TB, cfg Config) *Env {
	tb.Helper()
	e, err := newEnv(tb, cfg)
	if err != nil {
		tb.Fatalf("kvtest: %v", err)
		return nil
	}
	return e
}

// newEnv builds the stack and registers the end-of-test checks.
func newEnv(tb TB, cfg Config) (*Env, error) {
	e, err := build(tb, cfg)
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() {
		tb.Helper()
		if err := e.Check(); err != nil {
			tb.Errorf("kvtest: at the end of the test: %v\n%s", err, e.Dump())
			return
		}
		if err := e.CheckLeaks(); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return e, nil
}

func build(tb TB, cfg Config) (*Env, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Blocks == 0 {
		cfg.Blocks = 17
	}
	if cfg.BlockSize == 0 {
		cfg.BlockSize = 4
	}
	if cfg.SlidingWindow > 0 {
		cfg.NoIndex = true
	}
	e := &Env{
		tb:       tb,
		cfg:      cfg,
		Clock:    &Clock{},
		Log:      &Log{},
		seqNames: newSeqNames(),
	}
	var popts []blocks.Option
	if !cfg.NoNullBlock {
		popts = append(popts, blocks.WithNullBlock())
	}
	var err error
	if e.Pool, err = blocks.New(cfg.Blocks, popts...); err != nil {
		return nil, err
	}
	if cfg.HostBlocks > 0 && cfg.NoIndex {
		return nil, fmt.Errorf("%w: HostBlocks: a host tier is the index's, and this Config has none (NoIndex or SlidingWindow)", ErrInvalidConfig)
	}
	if !cfg.NoIndex {
		iopts := []prefix.Option{prefix.WithClock(e.Clock), prefix.WithObserver(&eventLogger{env: e, next: cfg.Observer}),
			prefix.WithEvictionHistory(cfg.Blocks)} // so that Explain tells evicted from never stored
		policy := cfg.EvictionPolicy
		if policy == nil && cfg.Eviction != "" {
			if policy, err = evict.ByName(cfg.Eviction); err != nil {
				return nil, err
			}
		}
		if cfg.HostBlocks > 0 {
			iopts = append(iopts, prefix.WithTiers(prefix.TierConfig{
				Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: cfg.HostBlocks}}, BlockBytes: 1,
			}))
		}
		if policy != nil {
			iopts = append(iopts, prefix.WithPolicy(func(n int, c evict.Clock) (evict.Policy, error) {
				p, err := policy(n, c)
				if err != nil {
					return nil, err
				}
				e.Evictions = RecordEvictions(p, e.Log)
				return e.Evictions, nil
			}))
		}
		if e.Index, err = prefix.New(e.Pool, cfg.BlockSize, iopts...); err != nil {
			return nil, err
		}
	}
	pre := cfg.Preemption
	if pre == nil {
		pre = evict.NewFCFSPreemption()
	}
	e.Preemptions = RecordPreemptions(pre, e.Log, e.Name)
	mc := blocktable.Config{
		Pool:          e.Pool,
		Index:         e.Index,
		BlockSize:     cfg.BlockSize,
		Preemption:    e.Preemptions,
		Watermark:     cfg.Watermark,
		SlidingWindow: cfg.SlidingWindow,
		Clock:         e.Clock,
		FullPromptHit: cfg.FullPromptHit,
	}
	if e.Manager, err = blocktable.New(mc); err != nil {
		return nil, err
	}
	return e, nil
}

// Config returns the configuration the Env was built with, defaults filled in.
func (e *Env) Config() Config { return e.cfg }

// Seq returns the sequence ID of name, giving it the next free ID (1, 2, ...) on first
// use, so that tests, logs and leak reports speak of "r1" rather than of 7.
func (e *Env) Seq(name string) blocktable.SeqID { return e.seq(name) }

// NameSeq gives the sequence id a name for logs and leak reports (a scheduler that picks
// its own IDs calls it when it admits).
func (e *Env) NameSeq(id blocktable.SeqID, name string) {
	if old, ok := e.names[id]; ok {
		delete(e.ids, old)
	}
	e.names[id], e.ids[name] = name, id
}

// Name returns the name of id, or "seq N" when it has none.
func (e *Env) Name(id blocktable.SeqID) string { return e.name(id) }

// Check verifies the whole stack now: the Manager's CheckInvariants (which checks the
// pool, the index and every table, and that every block's refcount equals its number of
// holders), and block conservation: free + evictable + held = capacity, with evictable no
// more than cached.
func (e *Env) Check() error {
	if err := e.Manager.CheckInvariants(); err != nil {
		return fmt.Errorf("broken invariant: %w", err)
	}
	b := e.Blocks()
	// Blocks derives Held as the pool's in-use count less Evictable, so the sum is Capacity
	// by construction; what can break is the index counting more evictable blocks than the
	// pool has in use (Held < 0), or fewer than none.
	if b.Evictable < 0 || b.Held < 0 {
		return fmt.Errorf("broken conservation: free %d + evictable %d + held %d != capacity %d", b.Free, b.Evictable, b.Held, b.Capacity)
	}
	if b.Evictable > b.Cached {
		return fmt.Errorf("broken conservation: %d evictable blocks but %d cached", b.Evictable, b.Cached)
	}
	return nil
}

// BlockCounts is where the pool's blocks are: Free + Evictable + Held = Capacity.
type BlockCounts struct {
	Capacity int
	// Free is the real free list (faults do not hide anything here).
	Free int
	// Evictable counts cached blocks that leaf eviction can free now; Cached all cached.
	Evictable, Cached int
	// Held counts blocks held by sequences, and cached blocks on the path to one.
	Held int
}

// Blocks counts the pool's blocks.
func (e *Env) Blocks() BlockCounts {
	ps := e.Pool.Stats()
	c := BlockCounts{Capacity: ps.Capacity, Free: ps.Free}
	if e.Index != nil {
		c.Evictable, c.Cached = e.Index.Reclaimable(), e.Index.Stats().Cached
	}
	c.Held = ps.InUse - c.Evictable
	return c
}
