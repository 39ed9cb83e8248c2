package bench

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/zmtp"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/kvevents/zmq"
)

// newDrainedPublisher starts a Publisher on loopback with one plain ZeroMQ subscriber that
// reads and discards everything, so that batches really cross a TCP socket. drain closes
// the subscriber.
func newDrainedPublisher(tb testing.TB, opts ...zmq.Option) (*zmq.Publisher, func()) {
	pub, err := zmq.NewPublisher("tcp://127.0.0.1:0", opts...)
	require.NoError(tb, err)
	sub, _ := kvDrainSub(tb, pub.Endpoint())
	return pub, func() { sub.Close() }
}

// kvDrainSub connects a bare SUB (ZMTP, as libzmq's) to endpoint, subscribes to
// everything, and counts what it receives.
func kvDrainSub(tb testing.TB, endpoint string) (io.Closer, *kvCountedMsgs) {
	addr, err := zmtp.TCPAddress(endpoint)
	require.NoError(tb, err)
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(tb, err)
	sub, err := zmtp.Handshake(nc, "SUB", zmtp.DefaultLimits, time.Now().Add(5*time.Second))
	require.NoError(tb, err)
	require.NoError(tb, sub.WriteMessage([]byte{1}))
	c := &kvCountedMsgs{ch: make(chan struct{}, 1<<20)}
	go func() {
		for {
			if _, err := sub.Read(); err != nil {
				return
			}
			c.ch <- struct{}{}
		}
	}()
	return sub, c
}

type kvCountedMsgs struct{ ch chan struct{} }

// kvStoredEvent is one BlockStored of one 16-token block with a 32-byte hash and a parent:
// the unit of a W3 commit.
func kvStoredEvent() *prefix.BlockStored {
	toks := make([]int32, BlockSize)
	r := NewSplitMix64(Seed)
	for i := range toks {
		toks[i] = r.Token()
	}
	return &prefix.BlockStored{
		Hashes: make([]byte, 32), HashSize: 32, Parent: make([]byte, 32),
		Blocks: []blocks.ID{1}, Tokens: toks, BlockSize: BlockSize,
	}
}

const kvEventsPerStep = 64

// BenchmarkKVEventsObserve is what the allocator's goroutine pays per event: encoding a
// one-block BlockStored into the open batch, a batch sealed every 64 events. It must not
// allocate.
func BenchmarkKVEventsObserve(b *testing.B) {
	e := kvStoredEvent()
	bt := newBatcher(b)
	out := make([]byte, 0, 1<<20)
	b.ReportAllocs()
	n := 0
	cpu0 := cpuTime()
	for b.Loop() {
		bt.BlockStored(e)
		if n++; n == kvEventsPerStep {
			out = bt.AppendBatch(out[:0], 1)
			n = 0
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/event")
	kvReportCPUPer(b, cpu0, 1, "cpu-ns/event")
}

// BenchmarkKVEventsPublish pushes one-block BlockStored events through a Publisher, a
// batch sealed every 64 events, to a subscriber on loopback; b.N events, timed until the
// subscriber has received every published batch. It reports events/s delivered, the
// events dropped because the sender fell behind (the queue holds 8,192 batches), and the
// CPU time per event of the whole process: observer, sender, ZeroMQ and the receiving
// subscriber, so an upper bound of what publishing costs a server.
func BenchmarkKVEventsPublish(b *testing.B) {
	e := kvStoredEvent()
	pub, err := zmq.NewPublisher("tcp://127.0.0.1:0")
	require.NoError(b, err)
	sub, got := kvDrainSub(b, pub.Endpoint())
	b.Cleanup(func() { pub.Close() })
	defer sub.Close()
	// A PUB socket drops what it publishes before the subscription reaches it: wait until
	// a probe gets through.
	deadline := time.Now().Add(10 * time.Second)
	for probed := false; !probed; {
		pub.AllBlocksCleared()
		pub.Flush()
		select {
		case <-got.ch:
			probed = true
		case <-time.After(10 * time.Millisecond):
			require.True(b, time.Now().Before(deadline), "subscription never took effect")
		}
	}
	for len(got.ch) > 0 {
		<-got.ch
	}
	start := pub.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := range b.N {
		pub.BlockStored(e)
		if (i+1)%kvEventsPerStep == 0 {
			pub.Flush()
		}
	}
	pub.Flush()
	// Closing the PUB socket drops what it has not written yet: wait for the sender, then
	// for the subscriber, and close only then.
	deadline = time.Now().Add(time.Minute)
	st := pub.Stats()
	for ; st.Published+st.SendErrors+st.DroppedBatches < st.Sealed; st = pub.Stats() {
		require.True(b, time.Now().Before(deadline), "the sender never caught up")
		time.Sleep(100 * time.Microsecond)
	}
	sent := st.Published - start.Published
	for i := uint64(0); i < sent; i++ {
		select {
		case <-got.ch:
		case <-time.After(10 * time.Second):
			b.Fatalf("received %d of %d batches", i, sent)
		}
	}
	b.StopTimer()
	kvReportCPUPer(b, cpu0, 1, "cpu-ns/event")
	require.NoError(b, pub.Close())
	dropped := st.DroppedEvents - start.DroppedEvents
	b.ReportMetric(float64(uint64(b.N)-dropped)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(dropped), "dropped-events")
}

// kvReportCPUPer reports the process's CPU time since start (see pool_cputime_test.go) per
// unit, when every iteration handled perOp units.
func kvReportCPUPer(b *testing.B, start time.Duration, perOp float64, unit string) {
	used := cpuTime() - start
	if start == 0 || used <= 0 {
		return
	}
	b.ReportMetric(float64(used.Nanoseconds())/float64(b.N)/perOp, unit)
}

// newBatcher is kvevents.NewBatcher, failing the test on an error.
func newBatcher(t require.TestingT, opts ...kvevents.Option) *kvevents.Batcher {
	b, err := kvevents.NewBatcher(opts...)
	require.NoError(t, err)
	return b
}
