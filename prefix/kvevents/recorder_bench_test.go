package kvevents

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
)

// BenchmarkRecordW3Commit is what a Publisher's observer methods cost the allocator's
// goroutine, alone: recording one W3-sized commit (a BlockStored of 48 blocks of 16 tokens
// with 32-byte hashes, W3's mean) and one eviction of 48 blocks, the open batch reset
// after each pair as Flush does. It reports ns per block (stored or removed) and must not
// allocate. Encoding and sending happen later on the sender goroutine.
func BenchmarkRecordW3Commit(b *testing.B) {
	const n = 48
	toks := make([]int32, n*16)
	for i := range toks {
		toks[i] = int32(i*7919) % 128000
	}
	stored := &prefix.BlockStored{Hashes: make([]byte, n*32), HashSize: 32, Parent: make([]byte, 32),
		Blocks: make([]blocks.ID, n), Tokens: toks, BlockSize: 16}
	removed := &prefix.BlockRemoved{Hashes: make([]byte, n*32), HashSize: 32, Blocks: make([]blocks.ID, n)}
	r := new(recording)
	b.ReportAllocs()
	for b.Loop() {
		r.blockStored(stored)
		r.blockRemoved(removed)
		r.reset()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*n), "ns/block")
}
