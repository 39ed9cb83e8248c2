package zmq_test

import (
	"encoding/binary"
	"math"
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

// zmtpGreeting is a peer's ZMTP 3.0 NULL greeting, as libzmq sends it.
func zmtpGreeting() []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10] = 0xff, 0x7f, 3
	copy(g[12:], "NULL")
	return g
}

// hugeFrame is issue 13 item 1's 73 bytes: a greeting and a command frame header
// declaring 2^62 bytes.
func hugeFrame() []byte {
	return binary.BigEndian.AppendUint64(append(zmtpGreeting(), 0x06), 1<<62)
}

func dialTCP(t *testing.T, endpoint string) net.Conn {
	t.Helper()
	addr, err := zmtp.TCPAddress(endpoint)
	require.NoError(t, err)
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return nc
}

// withinDeadline runs f and fails the test if it has not returned after d: a bound on a
// hang, not a timing.
func withinDeadline(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// routes checks that a subscriber still gets the publisher's batches.
func routes(t *testing.T, p *zmq.Publisher) *zmq.Subscriber {
	t.Helper()
	c := newIndex(t)
	sub, err := zmq.NewSubscriber(c, "s", p.Endpoint(), zmq.SubscribeReplay(p.ReplayEndpoint()), zmq.SubscribeResync(20*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sub.Close()) })
	seq := publishCleared(t, p)
	waitFor(t, sub, seq)
	require.EqualValues(t, seq+1, sub.Stats().Applied)
	return sub
}

// Issue 13 item 1: 73 bytes (a greeting and a frame header declaring 2^62 bytes) to the
// PUB port or the replay port killed the process inside go-zeromq (makeslice: len out of
// range). Now the connection is refused and everyone else is served.
func TestPublisherSurvivesHugeDeclaredFrames(t *testing.T) {
	p := newPublisher(t)
	for _, ep := range []string{p.Endpoint(), p.ReplayEndpoint()} {
		nc := dialTCP(t, ep)
		_, err := nc.Write(hugeFrame())
		require.NoError(t, err)
	}
	routes(t, p)
	require.Eventually(t, func() bool { return p.Stats().HandshakeFailures >= 2 }, 10*time.Second, time.Millisecond)
}

// fakePub is a hostile PUB endpoint: it runs serve on each connection.
func fakePub(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer nc.Close(); serve(nc) }()
		}
	}()
	return "tcp://" + ln.Addr().String()
}

// Issue 13 item 1, the other way: a hostile PUB endpoint killed a router inside
// NewSubscriber the same way. Now the subscriber counts a failed connection and retries.
func TestSubscriberSurvivesHostilePub(t *testing.T) {
	ep := fakePub(t, func(nc net.Conn) {
		_, _ = nc.Write(hugeFrame())
		time.Sleep(time.Second)
	})
	sub, err := zmq.NewSubscriber(newIndex(t), "s", ep, zmq.SubscribeRetry(time.Millisecond))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return sub.Stats().ConnectErrors >= 2 }, 10*time.Second, time.Millisecond)
	withinDeadline(t, 5*time.Second, "Close", func() { require.NoError(t, sub.Close()) })
}

// Issue 13 item 2: one silent connection (connect, send nothing) to the PUB port made
// NewSubscriber hang forever, and to the replay port kept subscribers in catch-up with
// ReplayErrors 0 (the handshake had no deadline, and go-zeromq handshakes one connection
// at a time). Now each connection is handshaken on its own, by a deadline.
func TestSilentConnectionsBlockNobody(t *testing.T) {
	p := newPublisher(t, zmq.WithHandshakeTimeout(200*time.Millisecond))
	dialTCP(t, p.Endpoint())
	dialTCP(t, p.ReplayEndpoint())
	time.Sleep(20 * time.Millisecond) // let the publisher accept them first
	sub := routes(t, p)
	require.Zero(t, sub.Stats().ReplayErrors)
	require.Eventually(t, func() bool { return p.Stats().HandshakeFailures >= 2 }, 10*time.Second, time.Millisecond, "both dropped at the deadline")

	// A silent PUB endpoint: the subscriber's handshake times out and it retries.
	ep := fakePub(t, func(nc net.Conn) { time.Sleep(2 * time.Second) })
	s2, err := zmq.NewSubscriber(newIndex(t), "s", ep, zmq.SubscribeHandshakeTimeout(50*time.Millisecond), zmq.SubscribeRetry(time.Millisecond))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s2.Stats().ConnectErrors >= 1 }, 10*time.Second, time.Millisecond)
	withinDeadline(t, 5*time.Second, "Close", func() { require.NoError(t, s2.Close()) })
}

// bigBatch publishes one batch of about 16 KB.
func bigBatch(p *zmq.Publisher, seq int) {
	toks := make([]int32, 16*64)
	for i := range toks {
		toks[i] = int32(seq*7 + i)
	}
	p.BlockStored(&prefix.BlockStored{Hashes: make([]byte, 64*32), HashSize: 32, Blocks: make([]blocks.ID, 64), Tokens: toks, BlockSize: 16})
	p.Flush()
}

// Issue 13 item 3: Close blocked its caller for more than 10 s while one subscriber had
// stopped reading and another had gone, and a healthy subscriber lost 9,176 of 20,000
// batches while Stats said Published 20000, DroppedBatches 0. Now each subscriber has its
// own queue and writer: the healthy one gets every batch that is not counted as dropped
// for it, the stalled one cannot hold anyone up, and Close returns within its linger.
func TestSlowSubscribersCannotBlockOrHideLosses(t *testing.T) {
	p, err := zmq.NewPublisher("tcp://127.0.0.1:0", zmq.WithLinger(200*time.Millisecond), zmq.WithWriteTimeout(time.Minute))
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			p.Close()
		}
	})
	stalled := dialRaw(t, p.Endpoint(), "SUB") // subscribes, never reads
	rawSubscribe(t, stalled, "")
	gone := dialRaw(t, p.Endpoint(), "SUB")
	rawSubscribe(t, gone, "")
	healthy := dialRaw(t, p.Endpoint(), "SUB")
	rawSubscribe(t, healthy, "")
	msgs := reader(t, healthy)
	require.Eventually(t, func() bool { return p.Stats().Subscribers == 3 }, 10*time.Second, time.Millisecond)
	// Probe until the healthy subscription has taken effect.
	var first uint64
	for {
		seq := publishCleared(t, p)
		if m, ok := recvWithin(t, msgs, 20*time.Millisecond); ok {
			first = binary.BigEndian.Uint64(m[1])
			break
		}
		_ = seq
	}
	gone.Close()
	const n = 3000 // about 48 MB: far more than the stalled peer's socket buffers hold
	for i := range n {
		bigBatch(p, i)
	}
	last, _ := p.LastSeq()
	got := map[uint64]bool{}
	healthyDrops := func() uint64 {
		for _, ps := range p.Peers() {
			if ps.Addr == healthy.NetConn().LocalAddr().String() {
				return ps.Dropped
			}
		}
		return 0
	}
	require.Eventually(t, func() bool {
		for {
			select {
			case m := <-msgs:
				got[binary.BigEndian.Uint64(m[1])] = true
				continue
			default:
			}
			break
		}
		return uint64(len(got)) >= last-first-healthyDrops()
	}, 30*time.Second, time.Millisecond)
	require.Zero(t, p.Stats().DroppedBatches, "the recorder's queue never filled")
	t0 := time.Now()
	withinDeadline(t, 5*time.Second, "Close", func() { require.NoError(t, p.Close()) })
	closed = true
	st := p.Stats()
	t.Logf("healthy: %d of %d received, %d counted dropped; Close took %v; stats %+v", len(got), last-first, healthyDrops(), time.Since(t0), st)
	require.EqualValues(t, st.Sealed, st.Published)
	require.Positive(t, st.SubscriberDrops, "the stalled subscriber's batches were dropped, and counted")
}

// fakePubSending is a PUB endpoint that sends the given sequence numbers, each with a
// valid batch, after the subscription.
func fakePubSending(t *testing.T, seqs ...uint64) string {
	b := newBatcher(t)
	b.AllBlocksCleared()
	payload := b.AppendBatch(nil, 1)
	return fakePub(t, func(nc net.Conn) {
		c, err := zmtp.Handshake(nc, "PUB", zmtp.DefaultLimits, time.Now().Add(5*time.Second))
		if err != nil {
			return
		}
		if _, err := c.Read(); err != nil { // the subscription
			return
		}
		for _, s := range seqs {
			seq := make([]byte, 8)
			binary.BigEndian.PutUint64(seq, s)
			if c.WriteMessage(nil, seq, payload) != nil {
				return
			}
		}
		time.Sleep(2 * time.Second)
	})
}

// Issue 13 item 7: sequence number 2^64-1 wrapped the subscriber's next sequence number
// to 0: batches 0-2 were applied again and Lost read 18446744073709551612. Now a jump
// that far ahead is counted as implausible and changes nothing.
func TestSequenceNumbersNeverWrap(t *testing.T) {
	sub, err := zmq.NewSubscriber(newIndex(t), "s", fakePubSending(t, 0, 1, 2, math.MaxUint64, 3))
	require.NoError(t, err)
	defer sub.Close()
	waitFor(t, sub, 3)
	st := sub.Stats()
	require.EqualValues(t, 4, st.Applied)
	require.EqualValues(t, 1, st.Implausible)
	require.Zero(t, st.Lost)
	require.Zero(t, st.Duplicates)
	require.EqualValues(t, 4, st.Next)

	// At the very end of the range: 2^64-1 is applied, and nothing after it can be.
	sub2, err := zmq.NewSubscriber(newIndex(t), "s", fakePubSending(t, math.MaxUint64-1, math.MaxUint64, 0, 1), zmq.SubscribeFrom(math.MaxUint64-1))
	require.NoError(t, err)
	defer sub2.Close()
	waitFor(t, sub2, math.MaxUint64)
	require.Eventually(t, func() bool { return sub2.Stats().Duplicates == 2 }, 10*time.Second, time.Millisecond)
	st = sub2.Stats()
	require.EqualValues(t, 2, st.Applied)
	require.Zero(t, st.Lost)
}

// Malformed framing from a PUB endpoint is counted and skipped; a message over the size
// cap ends the connection (the subscriber reconnects).
func TestSubscriberCountsMalformedMessages(t *testing.T) {
	ep := fakePub(t, func(nc net.Conn) {
		c, err := zmtp.Handshake(nc, "PUB", zmtp.DefaultLimits, time.Now().Add(5*time.Second))
		if err != nil {
			return
		}
		_, _ = c.Read()
		_ = c.WriteMessage([]byte("t"), []byte("short"), nil)          // seq not 8 bytes
		_ = c.WriteMessage([]byte("t"), make([]byte, 8), []byte{0xc1}) // not msgpack
		_ = c.WriteMessage([]byte("t"), make([]byte, 8), make([]byte, 4096))
		time.Sleep(2 * time.Second)
	})
	sub, err := zmq.NewSubscriber(newIndex(t), "s", ep, zmq.SubscribeMaxMessage(1024), zmq.SubscribeRetry(time.Hour))
	require.NoError(t, err)
	defer sub.Close()
	require.Eventually(t, func() bool { return sub.Stats().Malformed == 2 }, 10*time.Second, time.Millisecond)
	require.Zero(t, sub.Stats().Applied)
}

// Sizes allocated up front are bounded: a replay buffer or a subscriber queue of 2^40
// batches would panic in make (or on the first connection).
func TestPublisherRefusesHugeSizes(t *testing.T) {
	for _, o := range []zmq.Option{zmq.WithReplayBuffer(1 << 40), zmq.WithSubscriberQueue(1 << 40), zmq.WithMaxPeers(1 << 20), zmq.WithEvents(kvevents.WithQueue(1 << 40))} {
		p, err := zmq.NewPublisher("tcp://127.0.0.1:0", o)
		require.ErrorIs(t, err, kvevents.ErrInvalidArgument)
		require.Nil(t, p)
	}
}

// newBatcher is kvevents.NewBatcher, failing the test on an error.
func newBatcher(t require.TestingT, opts ...kvevents.Option) *kvevents.Batcher {
	b, err := kvevents.NewBatcher(opts...)
	require.NoError(t, err)
	return b
}
