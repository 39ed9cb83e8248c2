// Package evictfast carries the optional fast path that the prefix index takes through its
// default eviction policy, evict.NewLRU: evicting a chain, where each victim's parent
// becomes a candidate and is usually the next victim. One call adds the parent and pops
// the next victim, instead of an Add through the Policy interface (with an evict.Entry
// the LRU reads two fields of) and a Victim. Nothing outside the module can import it.
package evictfast

// Chain is implemented by evict.NewLRU's policy. AddVictim(key, t) is exactly
// Add(evict.Entry{Key: key, LastAccess: t}) followed by Victim(): the LRU orders by
// LastAccess and key alone.
type Chain interface {
	AddVictim(key int32, lastAccess uint64) (int32, bool)
}
