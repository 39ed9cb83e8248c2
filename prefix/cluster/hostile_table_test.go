package cluster_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// heldBlockBytes bounds the heap the index keeps per block it holds (about 32 B at the
// default cap): what one server's flood may cost the router is set by the cap, not by the
// blocks it sends.
const heldBlockBytes = 64

// TestHostileTable floods the index with one server's distinct blocks (integer hashes),
// ten times its per-server cap, and asserts the bounded outcome: exactly the cap held, the
// rest counted in Refused, and the heap the index keeps within heldBlockBytes per held
// block (the flood's blocks, kept, would be ten times that). With KVPAGE_HOSTILE_TABLE=1
// it floods at bench/README.md's scale, 8.4M blocks in 84 batches of 100,000 against the
// default cap, and prints the row: the time to apply them and the heap kept.
//
// What the index keeps is measured as what dropping it frees: the live heap after a
// forced collection with the index, less the live heap after one without it. Whatever
// else is live (here the last decoded batch, about 7 MB, kept as a subscriber keeps its
// Batch; a dead variable the compiler keeps live) is in both and cancels out. Measured
// as the heap's growth over the flood, as it was, the last batch counted as the index's
// (251 B per held block) and failed the bound; the index alone keeps about 36.
//
//	KVPAGE_HOSTILE_TABLE=1 go test -run TestHostileTable -v ./prefix/cluster/
func TestHostileTable(t *testing.T) {
	perBatch, batches, limit := 1<<15, 10, 1<<15
	print := os.Getenv("KVPAGE_HOSTILE_TABLE") != ""
	if print {
		perBatch, batches, limit = 100_000, 84, cluster.DefaultMaxBlocksPerServer
	}
	c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), 16, cluster.WithMaxBlocksPerServer(limit))
	require.NoError(t, err)
	e := &prefix.BlockStored{HashSize: 8, BlockSize: 16, Hashes: make([]byte, 8*perBatch), Blocks: make([]blocks.ID, perBatch), Tokens: make([]int32, 16*perBatch)}
	bt := newBatcher(t, kvevents.WithIntHashes())
	var last *kvevents.Batch
	var el time.Duration
	for i := range batches {
		for j := range perBatch {
			v := uint64(i*perBatch+j) * 0x9e3779b97f4a7c15
			for k := range 8 {
				e.Hashes[8*j+k] = byte(v >> (8 * k))
			}
		}
		bt.BlockStored(e)
		b, err := kvevents.DecodeBatch(bt.AppendBatch(nil, 1))
		require.NoError(t, err)
		t0 := time.Now()
		require.NoError(t, c.Apply("flood", b))
		el += time.Since(t0)
		last = b
	}
	st := c.Stats("flood")
	require.Equal(t, limit, st.Blocks)
	require.Equal(t, uint64(perBatch*batches-limit), st.Refused)
	require.NoError(t, c.CheckInvariants())
	kept := heapOf(func() { c = nil })
	runtime.KeepAlive(last)
	runtime.KeepAlive(bt)
	runtime.KeepAlive(e)
	require.LessOrEqual(t, kept, int64(heldBlockBytes*limit), "kept %d bytes for %d held blocks", kept, limit)
	if print {
		fmt.Printf("| one server's %.1fM blocks | %.2f s | +%.0f MiB retained | %d blocks held, %d refused |\n",
			float64(perBatch*batches)/1e6, el.Seconds(), float64(kept)/(1<<20), st.Blocks, st.Refused)
	}
}

// heapOf returns the live heap that drop frees: the heap after a forced collection, less
// the heap after another once drop has dropped the references it frees.
func heapOf(drop func()) int64 {
	var with, without runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&with)
	drop()
	runtime.GC()
	runtime.ReadMemStats(&without)
	return int64(with.HeapAlloc) - int64(without.HeapAlloc)
}
