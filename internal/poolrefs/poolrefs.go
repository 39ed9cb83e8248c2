// Package poolrefs hands the prefix index the reference counts of a blocks.Pool, so that
// the index's trusted paths (internal/trusted: a Manager acquiring a path Peek has just
// matched, releasing its own table, committing its own blocks) add and drop the holders of
// cached blocks in their own pass over the blocks instead of a second pass through the
// pool's checked Retain and Release. A cached block always keeps the index's own
// reference, so these paths never free a block: a block whose count can reach zero still
// goes through Pool.Release and the pool's free list. Nothing outside the module can
// import this package; package blocks installs Of.
package poolrefs

// Of returns the per-block holder counts of a *blocks.Pool, indexed by block ID. The slice
// is the pool's own (allocated once, never moved): writes to it are the pool's state.
var Of func(pool any) []int32

// Handoff is implemented by the prefix index as its pool's Reclaimer. When an allocation
// needs more blocks than are free, the pool hands it the whole free list and asks
// ReclaimInto for the rest: it evicts exactly len(dst) blocks, in the order Reclaim would,
// and writes their IDs into dst. Each evicted block keeps the one reference the cache held,
// which passes to the allocation: the block never goes through the free list (a count of 1
// -> 0 -> 1 and a ring write and read). The IDs are the ones the free list would have
// handed out, since Reclaim's victims join its tail in eviction order and the allocation
// takes everything up to them. It returns how many it wrote; fewer is a broken invariant.
type Handoff[ID ~int32] interface {
	ReclaimInto(dst []ID) int
}
