package prefix

// counters are the index's running totals.
type counters struct {
	lookups, lookedUp, hitTokens            uint64
	inserts, duplicates, evictions, dropped uint64
	// lookups of preempted requests readmitted (RecordResumedLookup)
	resLookups, resLookedUp, resHitTokens uint64
}

// Stats is a snapshot of an index's state and counters.
type Stats struct {
	// Lookups counts RecordLookup calls (Peek itself counts nothing); LookedUpTokens the
	// prompt tokens they were given; HitTokens the tokens of the blocks they matched.
	Lookups, LookedUpTokens, HitTokens uint64
	// Cached is the number of cached blocks; Evictable those that are unreferenced leaves
	// (candidates now); Reclaimable those that repeated leaf eviction can free now.
	Cached, Evictable, Reclaimable int
	// Namespaces is the number of namespaces with a root: those with cached blocks, and
	// at most one more that Cursor created and nothing was committed under yet.
	Namespaces int
	// Inserts counts blocks newly cached; Duplicates blocks committed whose content was
	// already cached under the same parent; Evictions blocks evicted (by Evict or for the
	// pool); Dropped blocks dropped by Reset or EvictBlocks.
	Inserts, Duplicates, Evictions, Dropped uint64
	// ResumedLookups, ResumedLookedUpTokens and ResumedHitTokens count, apart from the
	// above, the lookups of preempted requests admitted again (RecordResumedLookup): they
	// mostly re-hit their own blocks, which would flatter the hit rate (vLLM #25780).
	ResumedLookups, ResumedLookedUpTokens, ResumedHitTokens uint64
	// Free is the pool's free list: blocks that hold nothing, apart from the cached
	// blocks that are Reclaimable (the pool's Available is Free + Reclaimable).
	Free int
}

// HitRate is the token-weighted hit rate, HitTokens / LookedUpTokens (0 before any lookup).
func (s Stats) HitRate() float64 {
	if s.LookedUpTokens == 0 {
		return 0
	}
	return float64(s.HitTokens) / float64(s.LookedUpTokens)
}

// Stats returns a snapshot of the index's state and counters.
func (x *Index) Stats() Stats {
	return Stats{
		Lookups:        x.stats.lookups,
		LookedUpTokens: x.stats.lookedUp,
		HitTokens:      x.stats.hitTokens,
		Cached:         x.cached,
		Evictable:      x.policy.Len(),
		Reclaimable:    x.Reclaimable(),
		Namespaces:     x.numRoots(),
		Inserts:        x.stats.inserts,
		Duplicates:     x.stats.duplicates,
		Evictions:      x.stats.evictions,
		Dropped:        x.stats.dropped,

		ResumedLookups:        x.stats.resLookups,
		ResumedLookedUpTokens: x.stats.resLookedUp,
		ResumedHitTokens:      x.stats.resHitTokens,
		Free:                  x.pool.NumFree(),
	}
}
