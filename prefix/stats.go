package prefix

// counters are the index's running totals.
type counters struct {
	lookups, lookedUp, hitTokens            uint64
	inserts, duplicates, evictions, dropped uint64
}

// Stats is a snapshot of an index's state and counters.
type Stats struct {
	// Lookups counts Match calls (and RecordLookup calls after a Peek, which itself counts
	// nothing); LookedUpTokens the prompt tokens they were given; HitTokens the tokens of
	// the blocks they matched.
	Lookups, LookedUpTokens, HitTokens uint64
	// Cached is the number of cached blocks; Evictable those that are unreferenced leaves
	// (candidates now); Reclaimable those that repeated leaf eviction can free now.
	Cached, Evictable, Reclaimable int
	// Namespaces is the number of namespaces with a root: those with cached blocks, and
	// at most one more that Cursor created and nothing was committed under yet.
	Namespaces int
	// Inserts counts blocks newly cached; Duplicates blocks committed whose content was
	// already cached under the same parent; Evictions blocks evicted (by Evict or for the
	// pool); Dropped blocks dropped by Reset.
	Inserts, Duplicates, Evictions, Dropped uint64
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
		Evictable:      x.evLen(),
		Reclaimable:    x.Reclaimable(),
		Namespaces:     x.numRoots(),
		Inserts:        x.stats.inserts,
		Duplicates:     x.stats.duplicates,
		Evictions:      x.stats.evictions,
		Dropped:        x.stats.dropped,
	}
}
