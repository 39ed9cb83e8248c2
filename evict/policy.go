package evict

// DefaultPriority is the retention priority of a block that was given none, as in
// TensorRT-LLM's KvCacheRetentionConfig (priorities run from 0, evicted first, to 100).
const DefaultPriority = 35

// Entry describes one eviction candidate: a cached block that nobody but the cache holds.
//
// The cache that owns the blocks (the prefix index) fills every field; a policy reads the
// fields it needs and ignores the rest. Times come from a logical Clock, never wall time.
type Entry struct {
	// Key identifies the candidate: a dense index in [0, capacity) of the policy (a block
	// ID in the prefix index). Ties in every policy are broken by Key, smallest first, so
	// that every run is reproducible.
	Key int32
	// LastAccess is the logical time at which the block was last used. A block can become a
	// candidate long after its last use (a radix-tree parent becomes an evictable leaf when
	// its last child leaves), so policies order by LastAccess, not by arrival.
	LastAccess uint64
	// Hits counts how many times the cached content has been used (stored once, then reused
	// by each hit). It follows the content, not the key, which is reused after eviction.
	Hits uint32
	// Priority is the retention priority, 0 to 100; 0 means DefaultPriority.
	Priority uint8
	// PriorityUntil is the logical time after which Priority falls back to DefaultPriority;
	// 0 means it never does.
	PriorityUntil uint64
}

// Policy orders the evictable candidates of a cache and picks the next victim.
//
// Keys are dense: every key is in [0, capacity), the capacity given when the policy was
// built, so a policy keeps its state in flat arrays indexed by key. A key outside that
// range is a bug of the caller and panics.
//
// A Policy is driven by one goroutine (it is not safe for concurrent use). Add, Remove and
// Victim allocate nothing and cost at most O(log n) (Priority: amortised).
type Policy interface {
	// Name is the policy's short name, as used on the command line ("lru", "lfu", ...).
	Name() string
	// Add makes e.Key a candidate. Adding a key that is already a candidate replaces its entry.
	Add(e Entry)
	// Remove withdraws key from the candidates (it was hit again, or dropped by its owner)
	// and reports whether it was a candidate.
	Remove(key int32) bool
	// Victim removes and returns the candidate to evict next; ok is false when there is none.
	Victim() (key int32, ok bool)
	// Len is the number of candidates.
	Len() int
	// Reset drops every candidate (and any history the policy keeps).
	Reset()
}

// Restorer is a Policy that can undo its Victim calls exactly. A cache that pops victims
// it then cannot take (the prefix index's lower tiers skip a victim whose copy in the tier
// below is bad) gives them back with Restore, and they keep the rank they had.
//
// Restore(key) undoes the latest Victim call not undone yet, which returned key: key is a
// candidate again, and the policy is exactly as it was before that call, so that the
// victims that follow are the ones that would have followed without it. Victims are undone
// last first, and only other Victim calls (undone before it) may come between a Victim
// and its Restore; a caller that took some of the victims it popped undoes them all and
// then Removes the ones it took, which leaves the policy as those Removes alone would
// have. Restore allocates nothing and costs at most O(log n); it panics when key is a
// candidate.
//
// A policy whose order is a function of each candidate's Entry alone (LRU, MRU, LFU,
// Priority, Scored: the Entry's fields and the clock) need not implement it: Add with the
// entry the victim had gives it the same rank. One whose order depends on its history
// (FIFO's and S3FIFO's arrival numbers, SLRU's demotions) implements it, or a victim given
// back loses its place.
type Restorer interface {
	Policy
	Restore(key int32)
}

// Factory builds an empty policy for keys in [0, capacity) that reads the current time,
// if it needs to, from clock. The cache that owns the keys calls it, so that capacity and
// clock are the cache's own: prefix.WithPolicy takes a Factory, and ByName returns the
// built-in ones. It returns the constructor's error for a capacity it cannot serve.
type Factory func(capacity int, clock Clock) (Policy, error)
