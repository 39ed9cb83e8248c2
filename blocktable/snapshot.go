package blocktable

import (
	"runtime"
	"sync/atomic"

	"github.com/kvpage/kvpage/prefix"
)

// Snapshot is the Manager's and its index's statistics at one moment, as a StatsCell
// publishes them for other goroutines (a metrics endpoint, a dashboard).
type Snapshot struct {
	// Stats are the Manager's (Manager.Stats).
	Stats
	// Index is the prefix index's (prefix.Index.Stats); zero without an index.
	Index prefix.Stats
	// Seq numbers the publications: 0 before the first, then 1, 2, ...
	Seq uint64
}

// StatsCell hands statistics from the scheduler goroutine, which owns the Manager, to any
// number of readers on other goroutines, without a lock: the scheduler calls Publish (say
// once a step, or every N steps), readers call Load. It is a sequence lock over atomic
// words, so neither side allocates, Publish never waits, and Load returns a snapshot that
// one Publish wrote whole (it retries while a Publish is under way). Only one goroutine
// may Publish. The zero StatsCell is ready to use.
type StatsCell struct {
	seq   atomic.Uint64 // odd while a Publish writes
	words [snapshotWords]atomic.Uint64
}

// Publish copies m's statistics (and its index's) into the cell. Call it only from the
// goroutine that drives m. It costs what Manager.Stats costs (O(sequences)) and allocates
// nothing.
func (c *StatsCell) Publish(m *Manager) {
	var s Snapshot
	s.Stats = m.Stats()
	if m.index != nil {
		s.Index = m.index.Stats()
	}
	n := c.seq.Add(1) // odd: readers retry
	s.Seq = (n + 1) / 2
	w := s.encode()
	for i := range w {
		c.words[i].Store(w[i])
	}
	c.seq.Add(1)
}

// Load returns the last published snapshot (the zero Snapshot before the first Publish).
// It never blocks the publisher; it retries while a Publish is under way.
func (c *StatsCell) Load() Snapshot {
	for spin := 0; ; spin++ {
		before := c.seq.Load()
		if before&1 == 0 {
			var w [snapshotWords]uint64
			for i := range w {
				w[i] = c.words[i].Load()
			}
			if c.seq.Load() == before {
				var s Snapshot
				s.decode(&w)
				return s
			}
		}
		if spin%64 == 63 {
			runtime.Gosched()
		}
	}
}

// snapshotWords is the number of words encode writes: one per field.
const snapshotWords = 40

// encode and decode list every field of Snapshot once, in the same order (a test holds
// them to every field, so one added to Stats or prefix.Stats and forgotten here fails it).
func (s *Snapshot) encode() [snapshotWords]uint64 {
	st, x := &s.Stats, &s.Index
	return [snapshotWords]uint64{
		uint64(st.Running), uint64(st.Swapped), uint64(st.Capacity), uint64(st.Free), uint64(st.InUse),
		uint64(st.Cached), uint64(st.Evictable), uint64(st.HostInUse),
		st.Admitted, st.Finished, st.Aborted, st.Forks, st.Preemptions, st.SwapIns, st.CopyOnWrites,
		st.PromptTokens, st.HitTokens, st.ResumedAdmitted, st.ResumedPromptTokens, st.ResumedHitTokens,
		st.Evictions, st.RejectedAdmissions,
		x.Lookups, x.LookedUpTokens, x.HitTokens, uint64(x.Cached), uint64(x.Evictable), uint64(x.Reclaimable),
		uint64(x.Namespaces), x.Inserts, x.Duplicates, x.Evictions, x.Dropped,
		x.ResumedLookups, x.ResumedLookedUpTokens, x.ResumedHitTokens, uint64(x.Free),
		s.Seq, st.LoadedTokens, st.LoadFailedTokens,
	}
}

func (s *Snapshot) decode(w *[snapshotWords]uint64) {
	st, x := &s.Stats, &s.Index
	st.Running, st.Swapped, st.Capacity, st.Free, st.InUse = int(w[0]), int(w[1]), int(w[2]), int(w[3]), int(w[4])
	st.Cached, st.Evictable, st.HostInUse = int(w[5]), int(w[6]), int(w[7])
	st.Admitted, st.Finished, st.Aborted, st.Forks, st.Preemptions, st.SwapIns, st.CopyOnWrites = w[8], w[9], w[10], w[11], w[12], w[13], w[14]
	st.PromptTokens, st.HitTokens, st.ResumedAdmitted, st.ResumedPromptTokens, st.ResumedHitTokens = w[15], w[16], w[17], w[18], w[19]
	st.Evictions, st.RejectedAdmissions = w[20], w[21]
	x.Lookups, x.LookedUpTokens, x.HitTokens = w[22], w[23], w[24]
	x.Cached, x.Evictable, x.Reclaimable, x.Namespaces = int(w[25]), int(w[26]), int(w[27]), int(w[28])
	x.Inserts, x.Duplicates, x.Evictions, x.Dropped = w[29], w[30], w[31], w[32]
	x.ResumedLookups, x.ResumedLookedUpTokens, x.ResumedHitTokens, x.Free = w[33], w[34], w[35], int(w[36])
	s.Seq = w[37]
	st.LoadedTokens, st.LoadFailedTokens = w[38], w[39]
}
