package kvtest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
)

// HybridConfig describes the hybrid stack NewHybrid builds. The zero value is a small
// gpt-oss-like model: 17 blocks (the null block and 16 usable) of 4 tokens, full attention
// plus an 8-token sliding window, newest-first preemption.
type HybridConfig struct {
	// Groups are the KV-cache groups (default: full attention and an 8-token window, both
	// of 4-token blocks).
	Groups []hybrid.Spec
	// Blocks is the pool's size, the null block included (default 17).
	Blocks int
	// Preemption is the preemption policy (default evict.NewFCFSPreemption); it is
	// wrapped in a RecordingPreemption.
	Preemption evict.Preemption
	// MatchUnit, Eagle and FreeUncachedFirst are passed to hybrid.Config.
	MatchUnit         int
	Eagle             bool
	FreeUncachedFirst bool
	// Tiers gives the Manager lower tiers (hybrid.Config.Tiers); Check then verifies
	// their books too, and a block a transfer still holds at the end is a leak, named as
	// held by "a transfer in flight".
	Tiers *prefix.TierConfig
}

// HybridEnv is a hybrid.Manager built inside a test, with a decision log and the
// end-of-test checks: NewHybrid registers a cleanup that fails the test on a broken
// invariant of any group, or on any block still held when the test ends (every block must
// then be in the free queue: free, or cached and evictable).
//
// HybridEnv is not safe for concurrent use, like the Manager it holds.
type HybridEnv struct {
	// Manager is what the scheduler under test drives.
	Manager *hybrid.Manager
	// Log receives every preemption decision; Preemptions wraps the policy.
	Log         *Log
	Preemptions *RecordingPreemption

	tb  TB
	cfg HybridConfig
	seqNames
}

// NewHybrid builds the hybrid stack of cfg for one test and registers, with tb.Cleanup,
// the end-of-test check: every group's invariants and block conservation (Check), then the
// leak check (CheckLeaks). It fails the test at once (Fatalf) on a bad config
// (HybridConfig.Validate's error, or hybrid.New's), having built nothing.
func NewHybrid(tb TB, cfg HybridConfig) *HybridEnv {
	tb.Helper()
	if err := cfg.Validate(); err != nil {
		tb.Fatalf("kvtest: %v", err)
		return nil
	}
	if cfg.Blocks == 0 {
		cfg.Blocks = defaultHybridBlocks
	}
	if len(cfg.Groups) == 0 {
		cfg.Groups = []hybrid.Spec{hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 8}}
	}
	e := &HybridEnv{tb: tb, cfg: cfg, Log: &Log{}, seqNames: newSeqNames()}
	pre := cfg.Preemption
	if pre == nil {
		pre = evict.NewFCFSPreemption()
	}
	e.Preemptions = RecordPreemptions(pre, e.Log, e.Name)
	m, err := hybrid.New(hybrid.Config{Groups: cfg.Groups, NumBlocks: cfg.Blocks, MatchUnit: cfg.MatchUnit,
		Eagle: cfg.Eagle, FreeUncachedFirst: cfg.FreeUncachedFirst, Preemption: e.Preemptions, Tiers: cfg.Tiers})
	if err != nil {
		tb.Fatalf("kvtest: %v", err)
		return nil
	}
	e.Manager = m
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
	return e
}

// Config returns the configuration the HybridEnv was built with, defaults filled in.
func (e *HybridEnv) Config() HybridConfig { return e.cfg }

// Seq returns the sequence ID of name, giving it the next free ID (1, 2, ...) on first use.
func (e *HybridEnv) Seq(name string) blocktable.SeqID { return e.seq(name) }

// Name returns the name of id, or "seq N" when it has none.
func (e *HybridEnv) Name(id blocktable.SeqID) string { return e.name(id) }

// HybridBlocks is where the pool's blocks are, over all groups and per group:
// Free + Evictable + Held = Capacity.
type HybridBlocks struct {
	Capacity int
	// Free counts blocks in the free queue that hold no cached prefix; Evictable those
	// that do (an allocation evicts them in queue order).
	Free, Evictable int
	// Held counts blocks some sequence's table holds.
	Held int
	// HeldPerGroup and CachedPerGroup split Held and the cached blocks (held or not) by
	// KV-cache group.
	HeldPerGroup, CachedPerGroup []int
}

// Blocks counts the pool's blocks.
func (e *HybridEnv) Blocks() HybridBlocks {
	m := e.Manager
	ng := len(m.Groups())
	c := HybridBlocks{Capacity: m.NumBlocks() - 1, HeldPerGroup: make([]int, ng), CachedPerGroup: make([]int, ng)}
	for b := 1; b < m.NumBlocks(); b++ {
		st := m.Block(blocks.ID(b))
		if st.Cached {
			c.CachedPerGroup[st.Group]++
		}
		switch {
		case st.Refs > 0:
			c.Held++
		case st.Cached:
			c.Evictable++
		default:
			c.Free++
		}
	}
	for _, id := range m.Seqs(nil) {
		for g := range ng {
			t, _ := m.Table(id, g)
			for _, b := range t {
				if b != blocks.NullID {
					c.HeldPerGroup[g]++
				}
			}
		}
	}
	return c
}

// Check verifies the hybrid stack now: the Manager's CheckInvariants (per group: refcounts
// equal table entries, the free queue, the prefix index's lists), that no block is in the
// tables of two groups, that every group's cached count matches the blocks cached for it,
// and block conservation: the free queue's length equals Free + Evictable, the blocks no
// table holds (Free + Evictable + Held = Capacity then follows).
func (e *HybridEnv) Check() error {
	m := e.Manager
	if err := m.CheckInvariants(); err != nil {
		return fmt.Errorf("broken invariant: %w", err)
	}
	group := map[blocks.ID]int{}
	for _, id := range m.Seqs(nil) {
		for g := range m.Groups() {
			t, _ := m.Table(id, g)
			for _, b := range t {
				if b == blocks.NullID {
					continue
				}
				if h, ok := group[b]; ok && h != g {
					return fmt.Errorf("broken invariant: block %d is in the tables of groups %d and %d", b, h, g)
				}
				group[b] = g
			}
		}
	}
	b, st := e.Blocks(), m.Stats()
	// Blocks sorts every block into exactly one of Free, Evictable and Held, so their sum
	// is Capacity by construction; what can break is the free queue's own count.
	if st.Free != b.Free+b.Evictable {
		return fmt.Errorf("broken conservation: the free queue holds %d blocks, but free %d + evictable %d have no holder (held %d, capacity %d)", st.Free, b.Free, b.Evictable, b.Held, b.Capacity)
	}
	if !slices.Equal(b.CachedPerGroup, st.Cached) {
		return fmt.Errorf("broken conservation: cached per group %v, the Manager counts %v", b.CachedPerGroup, st.Cached)
	}
	return nil
}

// Leaks lists every block some table still holds, with the sequences (and groups) holding
// it. At the end of a test, when every sequence has finished or been preempted, it must be
// empty: every block is then in the free queue, free or cached and evictable.
func (e *HybridEnv) Leaks() []Leak {
	m := e.Manager
	holders := map[blocks.ID][]string{}
	for _, id := range m.Seqs(nil) {
		for g := range m.Groups() {
			t, _ := m.Table(id, g)
			for _, b := range t {
				if b != blocks.NullID {
					holders[b] = append(holders[b], fmt.Sprintf("%s (group %d)", e.Name(id), g))
				}
			}
		}
	}
	var leaks []Leak
	for b := 1; b < m.NumBlocks(); b++ {
		if st := m.Block(blocks.ID(b)); st.Refs > 0 {
			for range st.Transfers {
				holders[blocks.ID(b)] = append(holders[blocks.ID(b)], "a transfer in flight")
			}
			leaks = append(leaks, Leak{Block: blocks.ID(b), Refs: st.Refs, Holders: holders[blocks.ID(b)], Cached: st.Cached})
		}
	}
	return leaks
}

// CheckLeaks returns an error wrapping ErrLeak when any sequence is still known to the
// Manager (running or swapped out) or any block is still held, naming for each leaked
// block the sequences and groups holding it.
func (e *HybridEnv) CheckLeaks() error {
	var b strings.Builder
	if seqs := e.Manager.Seqs(nil); len(seqs) > 0 {
		names := make([]string, 0, len(seqs))
		for _, id := range seqs {
			n := e.Name(id)
			if e.Manager.Swapped(id) {
				n += " (swapped)"
			}
			names = append(names, n)
		}
		fmt.Fprintf(&b, "\n  sequences never finished or preempted: %s", strings.Join(names, ", "))
	}
	leaks := e.Leaks()
	writeLeaks(&b, leaks)
	if b.Len() == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d blocks still held at the end of the test:%s", ErrLeak, len(leaks), b.String())
}

// FinishAll finishes every sequence the Manager knows (running or swapped out), in ID
// order: a test that stops midway on purpose calls it so that the leak check passes.
func (e *HybridEnv) FinishAll() {
	ids := e.Manager.Seqs(nil)
	slices.Sort(ids)
	for _, id := range ids {
		if err := e.Manager.Finish(id); err != nil {
			e.tb.Errorf("kvtest: finish %s: %v", e.Name(id), err)
		}
	}
}

// Dump is a deterministic text of the hybrid stack: the counts, then every sequence's
// tables per group, in ID order (a swapped-out one is marked swapped and holds none).
func (e *HybridEnv) Dump() string {
	var b strings.Builder
	c := e.Blocks()
	fmt.Fprintf(&b, "blocks capacity=%d free=%d evictable=%d held=%d held/group=%v cached/group=%v\n",
		c.Capacity, c.Free, c.Evictable, c.Held, c.HeldPerGroup, c.CachedPerGroup)
	ids := e.Manager.Seqs(nil)
	slices.Sort(ids)
	for _, id := range ids {
		info, _ := e.Manager.Seq(id)
		fmt.Fprintf(&b, "seq %s tokens=%d computed=%d hit=%d", e.Name(id), info.Tokens, info.Computed, info.HitTokens)
		if info.State == blocktable.Swapped {
			b.WriteString(" swapped")
		}
		for g := range e.Manager.Groups() {
			t, _ := e.Manager.Table(id, g)
			fmt.Fprintf(&b, " g%d=%v", g, t)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
