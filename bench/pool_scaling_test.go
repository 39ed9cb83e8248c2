package bench

import (
	"fmt"
	"testing"

	"github.com/kvpage/kvpage/blocks"
)

// BenchmarkPoolScaling runs W1's churn (allocate 256 blocks into a reused slice, free them)
// on pools of 1K, 64K and 1M blocks. The pool's work per block does not depend on its
// size; what changes is the memory it touches.
//
// Two free-list orders are measured. "ascending" is a new pool: FIFO reuse walks the IDs in
// order, so a 1M pool streams through its 8 MiB of metadata sequentially and the hardware
// prefetcher hides most cache misses. "shuffled" first frees every block in a seeded random
// order, as a long-running server's free list ends up: FIFO reuse then touches refcounts in
// random order, and on pools whose metadata outgrows the caches each block costs a cache
// miss. That second figure is the honest one for a large, long-lived pool.
func BenchmarkPoolScaling(b *testing.B) {
	for _, size := range []struct {
		name   string
		blocks int
	}{{"1K", 1 << 10}, {"64K", 1 << 16}, {"1M", 1 << 20}} {
		for _, shuffled := range []bool{false, true} {
			order := "ascending"
			if shuffled {
				order = "shuffled"
			}
			b.Run(fmt.Sprintf("blocks=%s/order=%s", size.name, order), func(b *testing.B) {
				pool := newChurnPool(b, size.blocks, shuffled)
				churn(b, pool)
			})
		}
	}
}

// newChurnPool returns a pool of n free blocks whose free list is in ascending order or,
// with shuffled, in a seeded random order.
func newChurnPool(b *testing.B, n int, shuffled bool) *blocks.Pool {
	pool, err := blocks.New(n)
	if err != nil {
		b.Fatal(err)
	}
	if !shuffled {
		return pool
	}
	ids, err := pool.Allocate(make([]blocks.ID, 0, n), n)
	if err != nil {
		b.Fatal(err)
	}
	r := NewSplitMix64(Seed)
	for i := len(ids) - 1; i > 0; i-- { // Fisher-Yates
		j := int(r.Next() % uint64(i+1))
		ids[i], ids[j] = ids[j], ids[i]
	}
	if err := pool.Release(ids...); err != nil {
		b.Fatal(err)
	}
	return pool
}

// churn is W1's iteration: allocate W1Batch blocks into a reused slice, then free them.
func churn(b *testing.B, pool *blocks.Pool) {
	ids := make([]blocks.ID, 0, W1Batch)
	var err error
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		ids, err = pool.Allocate(ids[:0], W1Batch)
		if err != nil {
			b.Fatal(err)
		}
		if err := pool.Release(ids...); err != nil {
			b.Fatal(err)
		}
	}
	reportPerBlock(b, W1Batch)
	reportCPUPerBlock(b, cpu, W1Batch)
	if pool.NumFree() != pool.Capacity() {
		b.Fatalf("churn leaked blocks: %d of %d free", pool.NumFree(), pool.Capacity())
	}
}
