package cluster_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// A stream of Applies cannot starve a lookup. Here an Apply lands between every two runs
// of a lookup's hashing (the run hook applies one there, exactly, without goroutines),
// which made the lookup start its walk over after every run: ten walks of up to 1,024
// blocks for this prompt, quadratic in a longer one, and as many Applies let in. Now it
// starts over at most three times, then hashes the rest with the lock held: the hook is
// called three times, and the hits are those of the index after the last Apply.
func TestLookupRestartsAreBounded(t *testing.T) {
	const bs, blocks, step = 16, 1024, 64
	p := prompt(prefix.Namespace{}, 0, bs*blocks)
	var c *cluster.ClusterIndex
	hooked, calls, held := true, 0, step // held: the leading blocks server b holds
	c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), bs, cluster.WithRunHook(func() {
		if !hooked {
			return
		}
		calls++
		require.NoError(t, c.Apply("b", storeChain(t, "42", p, bs, held, held+step)))
		held += step
	}))
	require.NoError(t, err)
	require.NoError(t, c.Apply("a", storeChain(t, "42", p, bs, 0, blocks)))
	require.NoError(t, c.Apply("b", storeChain(t, "42", p, bs, 0, held)))

	got := match(t, c, p)
	require.Equal(t, 3, calls, "Applies let in between runs")
	require.EqualValues(t, 3, cluster.Restarts(c))
	require.Equal(t, []cluster.ServerHit{{"a", blocks}, {"b", 4 * step}}, got)
	hooked = false
	require.Equal(t, got, match(t, c, p), "a lookup with no Apply meanwhile")
	require.EqualValues(t, 3, cluster.Restarts(c))
}

// BenchmarkLookupDuringApplies routes a 512-block prompt that 8 servers hold whole while
// N goroutines apply batches without pause (a 16-block store, then its removal, each on
// a server of its own), and reports the routing goroutine's lookups per second and how
// often a lookup started its walk over (at most 3 times).
//
//	GOMAXPROCS=2 go test -run '^$' -bench LookupDuringApplies -count 6 ./prefix/cluster/
func BenchmarkLookupDuringApplies(b *testing.B) {
	const bs, blocks = 16, 512
	p := prompt(prefix.Namespace{}, 0, bs*blocks)
	for _, n := range []int{0, 1, 2, 4} {
		b.Run(fmt.Sprintf("appliers=%d", n), func(b *testing.B) {
			c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), bs)
			require.NoError(b, err)
			for s := range 8 {
				require.NoError(b, c.Apply(fmt.Sprintf("s%d", s), storeChain(b, "42", p, bs, 0, blocks)))
			}
			store, remove := bigBatches(b, 16)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				name := fmt.Sprintf("w%d", i)
				c.AddServer(name)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						_ = c.Apply(name, store)
						_ = c.Apply(name, remove)
					}
				}()
			}
			r0 := cluster.Restarts(c)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if _, k, _ := c.Route(p); k != blocks {
					b.Fatalf("routed with %d blocks, want %d", k, blocks)
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			close(stop)
			wg.Wait()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "lookups/s")
			b.ReportMetric(float64(cluster.Restarts(c)-r0)/float64(b.N), "restarts/lookup")
		})
	}
}
