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
