package cluster_test

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// bigBatches returns a batch storing n blocks (random 32-byte hashes, one chain) and one
// removing them.
func bigBatches(tb testing.TB, n int) (store, remove *kvevents.Batch) {
	e := &prefix.BlockStored{HashSize: 32, BlockSize: 16, Hashes: make([]byte, 32*n), Blocks: make([]blocks.ID, n), Tokens: make([]int32, 16*n)}
	x := uint64(1)
	for i := range e.Hashes {
		x = x*6364136223846793005 + 1442695040888963407
		e.Hashes[i] = byte(x >> 56)
	}
	b := newBatcher(tb)
	b.BlockStored(e)
	store, err := kvevents.DecodeBatch(b.AppendBatch(nil, 1))
	require.NoError(tb, err)
	b.BlockRemoved(&prefix.BlockRemoved{HashSize: 32, Hashes: e.Hashes, Blocks: e.Blocks})
	remove, err = kvevents.DecodeBatch(b.AppendBatch(nil, 1))
	require.NoError(tb, err)
	return store, remove
}

// BenchmarkRouteDuringApply is issue 13 item 6's figure: while one goroutine applies a
// 100,000-block batch (stores, then removals of the same blocks), another routes a
// 64-block prompt against 8 servers, 20 µs apart. It reports the CPU time of Apply's
// holds of the lock (what a Route can have to wait for, whatever the machine's load), the
// Route latency (the wait for the lock included, and on a loaded machine time spent
// descheduled), and the batch's apply time; for Apply as it is (the lock released every
// 1,024 blocks) and, for comparison, holding the lock for the whole batch as Apply did.
func BenchmarkRouteDuringApply(b *testing.B) {
	store, remove := bigBatches(b, 100_000)
	p := prompt(prefix.Namespace{}, 0, 64*16)
	for _, mode := range []struct {
		name  string
		chunk int
	}{{"chunked", 0}, {"whole-batch", math.MaxInt}} {
		b.Run(mode.name, func(b *testing.B) {
			var holdFrom, maxHold time.Duration
			var holds []time.Duration
			opts := []cluster.Option{cluster.WithHoldObserver(func(acquired bool) {
				if acquired {
					holdFrom = threadCPU()
				} else {
					holds = append(holds, threadCPU()-holdFrom)
				}
			})}
			if mode.chunk > 0 {
				opts = append(opts, cluster.WithApplyChunk(mode.chunk))
			}
			c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), 16, opts...)
			require.NoError(b, err)
			for s := range 8 {
				require.NoError(b, c.Apply(string(rune('a'+s)), storeChain(b, "42", p, 16, 0, 32)))
			}
			var lat []time.Duration
			var applyTime time.Duration
			for b.Loop() {
				for _, batch := range []*kvevents.Batch{store, remove} {
					var wg sync.WaitGroup
					done := make(chan struct{})
					started := make(chan struct{})
					wg.Add(1)
					go func() {
						defer wg.Done()
						runtime.LockOSThread() // threadCPU reads this thread's clock
						defer runtime.UnlockOSThread()
						close(started)
						t0 := time.Now()
						_ = c.Apply("a", batch)
						applyTime += time.Since(t0)
						close(done)
					}()
					<-started
				loop:
					for {
						select {
						case <-done:
							break loop
						default:
						}
						t0 := time.Now()
						c.Route(p)
						lat = append(lat, time.Since(t0))
						time.Sleep(20 * time.Microsecond) // a router between requests
					}
					wg.Wait()
				}
			}
			slices.Sort(holds)
			if len(holds) > 0 {
				maxHold = holds[len(holds)-1]
				b.ReportMetric(float64(maxHold.Nanoseconds()), "max-hold-cpu-ns")
				b.ReportMetric(float64(holds[len(holds)*99/100].Nanoseconds()), "p99-hold-cpu-ns")
			}
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-route-ns")
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-route-ns")
				b.ReportMetric(float64(lat[len(lat)*999/1000].Nanoseconds()), "p99.9-route-ns")
				b.ReportMetric(float64(len(lat)), "routes")
			}
			b.ReportMetric(float64(applyTime.Nanoseconds())/float64(2*b.N)/1e6, "apply-ms/batch")
		})
	}
}

// threadCPU returns the calling thread's CPU time (Linux: RUSAGE_THREAD).
func threadCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1, &ru) // RUSAGE_THREAD
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
