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

// TestHostileTable prints bench/README.md's row for one server flooding the router with
// blocks: 8.4M distinct blocks in 84 batches of 100,000 (integer hashes), the time to
// apply them and the heap the index keeps. It runs only with KVPAGE_HOSTILE_TABLE=1:
//
//	KVPAGE_HOSTILE_TABLE=1 go test -run TestHostileTable -v ./prefix/cluster/
func TestHostileTable(t *testing.T) {
	if os.Getenv("KVPAGE_HOSTILE_TABLE") == "" {
		t.Skip("set KVPAGE_HOSTILE_TABLE=1 to print the table")
	}
	const perBatch, batches = 100_000, 84
	c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), 16)
	require.NoError(t, err)
	e := &prefix.BlockStored{HashSize: 8, BlockSize: 16, Hashes: make([]byte, 8*perBatch), Blocks: make([]blocks.ID, perBatch), Tokens: make([]int32, 16*perBatch)}
	bt := newBatcher(t, kvevents.WithIntHashes())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
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
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := c.Stats("flood")
	fmt.Printf("| one server's 8.4M blocks | %.2f s | +%.0f MiB retained | %d blocks held, %d refused |\n",
		el.Seconds(), float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), st.Blocks, st.Refused)
}
