package bench

import (
	"runtime"
	"testing"

	"github.com/kvpage/kvpage/blocks"
)

// poolMemoryBlocks is the pool BenchmarkPoolMemory measures: a million blocks, 16 GiB of KV
// cache at 16 KiB per block, a large GPU's worth.
const poolMemoryBlocks = 1 << 20

// BenchmarkPoolMemory measures the pool's metadata: the bytes New allocates for a pool of
// 1M blocks, per block, read from the runtime's allocation counter rather than computed
// from the field types. The budget is 16 bytes per block; the benchmark fails above it.
func BenchmarkPoolMemory(b *testing.B) {
	var perBlock float64
	for b.Loop() {
		perBlock = bytesPerBlock(b, poolMemoryBlocks)
	}
	b.ReportMetric(perBlock, "bytes/block")
	if perBlock > 16 {
		b.Fatalf("pool metadata is %.2f bytes per block; the budget is 16", perBlock)
	}
}

// bytesPerBlock returns how many bytes New allocates for a pool of n blocks, per block.
// TotalAlloc counts every byte allocated and never goes down, so a collection during New
// cannot hide anything.
func bytesPerBlock(b *testing.B, n int) float64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	pool, err := blocks.New(n, blocks.WithNullBlock())
	runtime.ReadMemStats(&after)
	if err != nil {
		b.Fatal(err)
	}
	runtime.KeepAlive(pool)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
}
