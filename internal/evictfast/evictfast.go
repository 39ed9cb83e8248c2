// Package evictfast carries the optional fast paths that the prefix index takes through its
// default eviction policy, evict.NewLRU: evicting a chain, where each victim's parent
// becomes a candidate and is usually the next victim, and adding a candidate by its key
// and last access alone. One call adds the parent and pops the next victim, instead of an
// Add through the Policy interface (with an evict.Entry the LRU reads two fields of, one
// of them on a line of its own in the index) and a Victim. Nothing outside the module can
// import it; package evict installs Of.
package evictfast

// Chain is implemented by evict.NewLRU's policy. AddVictim(key, t) is exactly
// Add(evict.Entry{Key: key, LastAccess: t}) followed by Victim(), and AddAt(key, t) exactly
// Add(evict.Entry{Key: key, LastAccess: t}): the LRU orders by LastAccess and key alone.
// AddAfterVictim(key, t) is AddAt(key, t) for a key that is not a candidate, called right
// after Victim: a victim's parent left an unreferenced leaf, which had a child and so was
// no candidate, where the chain stops (one block evicted) rather than going on to the next
// victim.
type Chain interface {
	AddVictim(key int32, lastAccess uint64) (int32, bool)
	AddAt(key int32, lastAccess uint64)
	AddAfterVictim(key int32, lastAccess uint64)
}

// Of returns the fast path of policy p if p is exactly evict.NewLRU's policy, and nil for
// any other, including a policy that embeds the LRU (and so has its methods) but orders by
// more than the LRU does: the fast paths drop every field of an evict.Entry but the key and
// the last access, which only the LRU itself may ignore.
var Of func(p any) Chain
