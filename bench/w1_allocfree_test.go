package bench

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
)

// BenchmarkW1AllocFree is W1 of ../shared/workloads.md exactly: a pool of 65,536 blocks; one
// iteration allocates 256 blocks into a reused slice and then frees those 256. It reports
// ns/block (allocate + free, per block) beside the usual ns/op and allocs/op, which must be 0,
// and cpu-ns/block, the same cost in CPU time (see pool_cputime_test.go).
// vLLM's Python block pool takes 298 ns/block on the same work.
func BenchmarkW1AllocFree(b *testing.B) {
	pool, err := blocks.New(W1PoolBlocks)
	if err != nil {
		b.Fatal(err)
	}
	churn(b, pool)
}

// reportPerBlock reports the mean cost of one block when every iteration handled perOp blocks.
func reportPerBlock(b *testing.B, perOp int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(perOp), "ns/block")
}
