package hybrid

import (
	"runtime"
	"sync/atomic"
)

// StatsCell hands a Manager's Stats from the scheduler goroutine, which owns the Manager,
// to readers on other goroutines (a metrics endpoint) without a lock, as
// blocktable.StatsCell does for the single-group Manager: the scheduler calls Publish, say
// once a step; readers call Load or LoadInto. It is a sequence lock over atomic words:
// Publish never waits and allocates nothing after its first call, and a reader gets a
// snapshot one Publish wrote whole. Only one goroutine may Publish. A cell sized for one
// Manager's groups is resized when a Manager with another number of groups publishes into
// it (that Publish allocates; readers then see the new Manager's groups). The zero
// StatsCell is ready to use.
type StatsCell struct {
	seq   atomic.Uint64 // odd while a Publish writes
	words atomic.Pointer[[]atomic.Uint64]
}

// statsFixed is the number of words before the per-group cached counts.
const statsFixed = 20

// Publish copies m's statistics into the cell. Call it only from the goroutine that drives
// m. It costs O(groups).
func (c *StatsCell) Publish(m *Manager) {
	c.seq.Add(1) // odd: readers retry
	p := c.words.Load()
	if p == nil || len(*p) != statsFixed+2*m.ng {
		// First, or another number of groups: new words, which no reader of the old ones
		// takes for this snapshot (it reads the pointer inside the sequence lock).
		w := make([]atomic.Uint64, statsFixed+2*m.ng) // then cached and prefixes per group
		p = &w
		c.words.Store(p)
	}
	w := *p
	k := &m.counters
	ts := m.st.t
	vals := [statsFixed]uint64{
		uint64(m.st.q.NumBlocks() - 1), uint64(m.st.free()), uint64(len(m.seqs)), uint64(ts.LiveNodes()),
		m.st.evictions, ts.DuplicateCount(), m.st.dropped,
		k.HitTokens, k.PromptTokens, k.ResumedHitTokens, k.ResumedPromptTokens,
		k.Forks, k.CopyOnWrites, k.Preemptions, uint64(m.ng),
		uint64(len(m.swapped)), m.tierCounts.SwapOuts, m.tierCounts.SwapIns, m.tierCounts.LoadedTokens, m.tierCounts.LoadFailedTokens,
	}
	for i, v := range vals {
		w[i].Store(v)
	}
	for g := range m.ng {
		w[statsFixed+g].Store(uint64(ts.CachedIn(g)))
		w[statsFixed+m.ng+g].Store(uint64(ts.PrefixesIn(g)))
	}
	c.seq.Add(1)
}

// Load returns the last published Stats (the zero Stats before the first Publish).
func (c *StatsCell) Load() Stats {
	var s Stats
	c.LoadInto(&s)
	return s
}

// LoadInto writes the last published Stats into dst, reusing the capacity of dst.Cached
// and dst.CachedPrefixes, so
// that a reader polling the cell allocates nothing in steady state. It retries while a
// Publish is under way and never blocks the publisher.
func (c *StatsCell) LoadInto(dst *Stats) {
	var vals [statsFixed]uint64
	cached, prefixes := dst.Cached[:0], dst.CachedPrefixes[:0]
	for spin := 0; ; spin++ {
		before := c.seq.Load()
		if before&1 == 0 {
			p := c.words.Load()
			if p == nil {
				*dst = Stats{Cached: cached, CachedPrefixes: prefixes}
				return
			}
			w := *p
			for i := range vals {
				vals[i] = w[i].Load()
			}
			cached, prefixes = cached[:0], prefixes[:0]
			ng := (len(w) - statsFixed) / 2 // the words' own size, whatever vals say
			for g := range ng {
				cached = append(cached, int(w[statsFixed+g].Load()))
				prefixes = append(prefixes, int(w[statsFixed+ng+g].Load()))
			}
			if c.seq.Load() == before {
				break
			}
		}
		if spin%64 == 63 {
			runtime.Gosched()
		}
	}
	*dst = Stats{
		Capacity: int(vals[0]), Free: int(vals[1]), Running: int(vals[2]), Nodes: int(vals[3]),
		Evictions: vals[4], Duplicates: vals[5], Dropped: vals[6],
		HitTokens: vals[7], PromptTokens: vals[8], ResumedHitTokens: vals[9], ResumedPromptTokens: vals[10],
		Forks: vals[11], CopyOnWrites: vals[12], Preemptions: vals[13], Cached: cached,
		CachedPrefixes: prefixes,
		Swapped:        int(vals[15]), SwapOuts: vals[16], SwapIns: vals[17], LoadedTokens: vals[18], LoadFailedTokens: vals[19],
	}
}
