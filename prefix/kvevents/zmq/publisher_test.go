package zmq_test

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/zmtp"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/kvevents/zmq"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

func newPublisher(t *testing.T, opts ...zmq.Option) *zmq.Publisher {
	t.Helper()
	opts = append([]zmq.Option{zmq.WithReplay("tcp://127.0.0.1:0"), zmq.WithEvents(kvevents.WithTimestamps(func() float64 { return 7 }))}, opts...)
	p, err := zmq.NewPublisher("tcp://127.0.0.1:0", opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

// publishCleared seals a batch holding one AllBlocksCleared event.
func publishCleared(t *testing.T, p *zmq.Publisher) uint64 {
	t.Helper()
	p.AllBlocksCleared()
	seq, ok := p.Flush()
	require.True(t, ok)
	return seq
}

// recvWithin receives one message or fails the test after d.
func recvWithin(t *testing.T, msgs <-chan [][]byte, d time.Duration) ([][]byte, bool) {
	t.Helper()
	select {
	case m := <-msgs:
		return m, true
	case <-time.After(d):
		return nil, false
	}
}

// dialRaw connects a bare ZMTP peer of the given socket type: what libzmq would be.
func dialRaw(t *testing.T, endpoint, socketType string) *zmtp.Conn {
	t.Helper()
	addr, err := zmtp.TCPAddress(endpoint)
	require.NoError(t, err)
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	c, err := zmtp.Handshake(nc, socketType, zmtp.DefaultLimits, time.Now().Add(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// subscribe sends a ZMTP 3.0 subscription.
func rawSubscribe(t *testing.T, c *zmtp.Conn, topic string) {
	require.NoError(t, c.WriteMessage(append([]byte{1}, topic...)))
}

func reader(t *testing.T, c *zmtp.Conn) <-chan [][]byte {
	msgs := make(chan [][]byte, 1024)
	go func() {
		for {
			m, err := c.Read()
			if err != nil {
				return
			}
			msgs <- m.Frames
		}
	}()
	return msgs
}

// A plain ZeroMQ SUB socket sees vLLM's framing: [topic, 8-byte big-endian sequence
// number, msgpack batch], sequence numbers from 0 up.
func TestPublisherFramesLikeVLLM(t *testing.T) {
	p := newPublisher(t, zmq.WithTopic("kv@pod-1@model"))
	sub := dialRaw(t, p.Endpoint(), "SUB")
	rawSubscribe(t, sub, "kv@")
	msgs := reader(t, sub)

	// A PUB socket drops messages until the subscription has reached it: probe until one
	// arrives (bounded), then every later batch must arrive, in order.
	deadline := time.Now().Add(10 * time.Second)
	var first [][]byte
	for {
		publishCleared(t, p)
		if m, ok := recvWithin(t, msgs, 20*time.Millisecond); ok {
			first = m
			break
		}
		require.True(t, time.Now().Before(deadline), "the subscription never took effect")
	}
	require.Len(t, first, 3)
	require.Equal(t, "kv@pod-1@model", string(first[0]))
	require.Len(t, first[1], 8)
	next := binary.BigEndian.Uint64(first[1]) + 1
	for m := range 20 {
		p.BlockRemoved(&prefix.BlockRemoved{Hashes: make([]byte, 32), HashSize: 32, Blocks: []blocks.ID{blocks.ID(m)}})
		p.Flush()
	}
	for range 20 {
		m, ok := recvWithin(t, msgs, 10*time.Second)
		require.True(t, ok)
		require.Equal(t, next, binary.BigEndian.Uint64(m[1]), "consecutive sequence numbers")
		next++
		b, err := kvevents.DecodeBatch(m[2])
		require.NoError(t, err)
		require.Equal(t, 7.0, b.Timestamp, "the injected clock")
		require.Equal(t, kvevents.KindBlockRemoved, b.Events[0].Kind)
	}
}

// The replay socket answers [empty, start seq] with [empty, seq, payload] per buffered
// batch from start on, then [empty, -1, empty]; the buffer keeps only the last batches.
func TestReplayProtocol(t *testing.T) {
	p := newPublisher(t, zmq.WithReplayBuffer(3))
	for range 5 {
		publishCleared(t, p) // seqs 0..4; the buffer keeps 2, 3, 4
	}
	waitPublished(t, p, 5)

	dealer := dialRaw(t, p.ReplayEndpoint(), "DEALER")
	msgs := reader(t, dealer)
	for _, tc := range []struct {
		from uint64
		want []uint64
	}{{0, []uint64{2, 3, 4}}, {3, []uint64{3, 4}}, {9, nil}} {
		start := make([]byte, 8)
		binary.BigEndian.PutUint64(start, tc.from)
		require.NoError(t, dealer.WriteMessage(nil, start))
		var got []uint64
		for {
			m, ok := recvWithin(t, msgs, 10*time.Second)
			require.True(t, ok, "no answer")
			require.Len(t, m, 3)
			require.Empty(t, m[0], "the delimiter")
			if binary.BigEndian.Uint64(m[1]) == ^uint64(0) {
				require.Empty(t, m[2], "the end marker has an empty payload")
				break
			}
			got = append(got, binary.BigEndian.Uint64(m[1]))
			_, err := kvevents.DecodeBatch(m[2])
			require.NoError(t, err)
		}
		require.Equal(t, tc.want, got, "from %d", tc.from)
	}
	require.EqualValues(t, 3, p.Stats().Replays)
}

func waitPublished(t *testing.T, p *zmq.Publisher, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool { return p.Stats().Published >= n }, 10*time.Second, time.Millisecond)
}

// heldSender is a send hook that holds the sender in its first batch until gate closes,
// and signals held once it is there: by then the Recorder has recycled that batch's
// recording (it does before Send), so the queue and free recordings left are exactly
// the configured queue's.
func heldSender() (hook func(), held, gate chan struct{}) {
	held, gate = make(chan struct{}, 1), make(chan struct{})
	return func() {
		select {
		case held <- struct{}{}:
		default:
		}
		<-gate
	}, held, gate
}

// With every queue slot taken, Flush drops the batch at once, counts it, and still uses
// its sequence number, so that subscribers see the gap.
func TestPublisherDropsInsteadOfWaiting(t *testing.T) {
	hook, held, gate := heldSender()
	p := newPublisher(t, zmq.WithEvents(kvevents.WithQueue(2)), zmq.WithSendHook(hook))
	publishCleared(t, p) // 0: the sender holds it
	<-held
	for range 3 {
		p.AllBlocksCleared()
		p.AllBlocksCleared()
		p.Flush() // 1 and 2 fill the queue's two slots: 3 finds none
	}
	st := p.Stats()
	require.EqualValues(t, 4, st.Sealed)
	require.EqualValues(t, 1, st.DroppedBatches)
	require.EqualValues(t, 2, st.DroppedEvents)
	last, ok := p.LastSeq()
	require.True(t, ok)
	require.EqualValues(t, 3, last, "the dropped batch used sequence number 3")
	close(gate)
	waitPublished(t, p, 3)
}

// A subscriber that finds a gap the replay buffer cannot fill counts it as lost and goes on.
func TestSubscriberCountsUnrecoverableGaps(t *testing.T) {
	hook, held, gate := heldSender()
	p := newPublisher(t, zmq.WithEvents(kvevents.WithQueue(1)), zmq.WithSendHook(hook))
	publishCleared(t, p) // 0: the sender holds it
	<-held
	publishCleared(t, p) // 1: queued
	publishCleared(t, p) // 2: dropped
	close(gate)
	waitPublished(t, p, 2)
	publishCleared(t, p) // 3
	waitPublished(t, p, 3)

	c := newIndex(t)
	sub, err := zmq.NewSubscriber(c, "s", p.Endpoint(), zmq.SubscribeReplay(p.ReplayEndpoint()), zmq.SubscribeResync(20*time.Millisecond))
	require.NoError(t, err)
	defer func() { require.NoError(t, sub.Close()) }()
	waitFor(t, sub, 3)
	st := sub.Stats()
	require.EqualValues(t, 3, st.Applied)
	require.EqualValues(t, 1, st.Lost, "batch 2 was dropped by the publisher")
	require.EqualValues(t, 4, st.Next)
}

func newIndex(t *testing.T) *cluster.ClusterIndex {
	t.Helper()
	c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR(e2eSeed), e2eBlockSize)
	require.NoError(t, err)
	return c
}

func match(t *testing.T, c *cluster.ClusterIndex, p *prefix.Prompt) []cluster.ServerHit {
	t.Helper()
	hits, err := c.Match(nil, p)
	require.NoError(t, err)
	return hits
}

func seqTokens(from, to int32) []int32 {
	out := make([]int32, 0, to-from)
	for v := from; v < to; v++ {
		out = append(out, v)
	}
	return out
}
