// Package poolrefs hands the prefix index the reference counts of a blocks.Pool, so that
// the index's trusted paths (internal/trusted: a Manager acquiring a path Peek has just
// matched, releasing its own table, committing its own blocks) add and drop the holders of
// cached blocks in their own pass over the blocks instead of a second pass through the
// pool's checked Retain and Release. A cached block always keeps the index's own
// reference, so these paths never free a block: a block whose count can reach zero still
// goes through Pool.Release and the pool's free list. A Manager's table takes its decode
// step's one new block through AllocateOne. Nothing outside the module can import this
// package; package blocks installs Of and AllocateOne.
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
//
// ReclaimOne is ReclaimInto for one block without the slice, for a one-block allocation
// (AllocateOne): the same victim, the same writes, its ID returned. It reports false, having
// changed nothing, when nothing can be evicted.
type Handoff[ID ~int32] interface {
	ReclaimInto(dst []ID) int
	ReclaimOne() (ID, bool)
}

// AllocateOne is a *blocks.Pool's allocation of exactly one block for a caller that has
// checked everything else (a Manager's table starting a new block on a decode step): the
// ID Allocate(dst, 1) would append, with the same counters, without the slice or the
// separate Available check. It reports false, having changed nothing (not even the failed
// allocations counter), when the pool has no block to give or when the allocation needs a
// path it does not take (fault injection, a Reclaimer that does not hand blocks over); the
// caller then takes Allocate's path, which gives the answer. Package blocks installs it.
var AllocateOne func(pool any) (int32, bool)
