package blocks

// ID identifies one physical KV block: an index into the GPU's KV cache tensors. It is an
// int32 because that is what paged-attention kernels read from a block table.
type ID int32

// NullID is the reserved null block of a pool created WithNullBlock: vLLM's block 0, which
// padding and out-of-window table slots point at. It is never handed out and never freed.
const NullID ID = 0

// Reclaimer frees cached blocks on demand. The pool asks it when its free list cannot cover
// an allocation; the prefix index implements it by evicting unreferenced cached blocks.
type Reclaimer interface {
	// Reclaimable reports how many blocks Reclaim can certainly free right now. The pool
	// trusts this number: it checks free + Reclaimable() >= n before it changes anything,
	// so that an allocation never evicts and then fails.
	Reclaimable() int
	// Reclaim frees at least n blocks (n <= Reclaimable()) by releasing them to the pool,
	// and returns how many it freed.
	Reclaim(n int) int
}
