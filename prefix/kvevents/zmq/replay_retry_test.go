package zmq_test

import (
	"context"
	"encoding/binary"
	"math"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/internal/zmtp"
	"github.com/kvpage/kvpage/prefix/kvevents/zmq"
)

// The subscriber keeps its replay connection between replays. When that connection died
// meanwhile while the publisher lives on (here the replay server closes it after its first
// answer), the next replay failed on it (ReplayErrors) and the gap it was to fill was
// counted Lost although the publisher still buffered it; the request is now made once
// more on a new connection.
//
// The order is the test's own, by channels, not by time: the replay server closes its
// end of the first connection before it signals firstReplayDone, and the publisher sends
// the live batches only after that and once the subscriber has applied the start-up
// replay (batch 5), so the gap at 9 is always asked for on the kept, dead connection.
// The deadlines only bound a failure.
func TestReplayRetriesOnADeadConnection(t *testing.T) {
	b := newBatcher(t)
	b.AllBlocksCleared()
	payload := b.AppendBatch(nil, 1)
	seq := func(s uint64) []byte { return binary.BigEndian.AppendUint64(nil, s) }
	var published atomic.Uint64 // the last batch the fake publisher has published
	published.Store(5)
	var conns atomic.Int32
	firstReplayDone := make(chan struct{})
	replayEP := fakePub(t, func(nc net.Conn) {
		first := conns.Add(1) == 1
		c, err := zmtp.Handshake(nc, "ROUTER", zmtp.DefaultLimits, time.Now().Add(5*time.Second))
		if err != nil {
			return
		}
		for {
			m, err := c.Read()
			if err != nil {
				return
			}
			if m.Command != "" || len(m.Frames) != 2 || len(m.Frames[1]) != 8 {
				continue
			}
			for s := binary.BigEndian.Uint64(m.Frames[1]); s <= published.Load(); s++ {
				if c.WriteMessage(nil, seq(s), payload) != nil {
					return
				}
			}
			if c.WriteMessage(nil, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, nil) != nil {
				return
			}
			if first {
				_ = nc.Close() // the connection dies; the publisher lives on
				close(firstReplayDone)
				return
			}
		}
	})
	started := make(chan *zmq.Subscriber, 1) // the subscriber, once NewSubscriber returned
	stop := make(chan struct{})
	defer close(stop)
	pubEP := fakePub(t, func(nc net.Conn) {
		c, err := zmtp.Handshake(nc, "PUB", zmtp.DefaultLimits, time.Now().Add(5*time.Second))
		if err != nil {
			return
		}
		if _, err := c.Read(); err != nil { // the subscription
			return
		}
		<-firstReplayDone // the replay connection is closed by now
		sub := <-started
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = sub.WaitFor(ctx, 5) // the start-up replay is applied
		cancel()
		if err != nil {
			return // waitFor below fails the test
		}
		published.Store(9)
		for _, s := range []uint64{6, 9} { // 7 and 8 did not reach this subscriber live
			if c.WriteMessage(nil, seq(s), payload) != nil {
				return
			}
		}
		<-stop
	})
	// The start-up replay (from 0) is answered with 0-5 on the first connection, which
	// then dies; live 6 follows; live 9 makes a gap, replayed from 7.
	sub, err := zmq.NewSubscriber(newIndex(t), "s", pubEP, zmq.SubscribeReplay(replayEP), zmq.SubscribeResync(time.Hour))
	require.NoError(t, err)
	defer sub.Close()
	started <- sub
	waitFor(t, sub, 9)
	st := sub.Stats()
	require.Zero(t, st.ReplayErrors, "the dead connection was redialled: %+v", st)
	require.Zero(t, st.Lost, "%+v", st)
	require.EqualValues(t, 10, st.Applied, "%+v", st)
	require.EqualValues(t, 2, conns.Load())
}

// At the top of the range: a publisher may buffer batch 2^64-1, whose number is also the
// replay's end marker, and its answer may end there, the connection dying before the
// marker. The batch used to be taken for the marker (and the real marker, left on the
// kept connection, for the answer to the next request); once taken as a batch, the
// replay's retry asked again from the batch after it, which wraps to 0, so from 2^64-1
// itself, and counted the answer as a Duplicate. Now the marker is the message with an
// empty payload, and after batch 2^64-1 there is nothing left to ask for: one request, no
// retry, no error.
func TestReplayAtTheTopOfTheRange(t *testing.T) {
	const top = math.MaxUint64
	b := newBatcher(t)
	b.AllBlocksCleared()
	payload := b.AppendBatch(nil, 1)
	seq := func(s uint64) []byte { return binary.BigEndian.AppendUint64(nil, s) }
	end := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	var conns, requests atomic.Int32
	replayEP := fakePub(t, func(nc net.Conn) {
		conns.Add(1)
		c, err := zmtp.Handshake(nc, "ROUTER", zmtp.DefaultLimits, time.Now().Add(5*time.Second))
		if err != nil {
			return
		}
		for {
			m, err := c.Read()
			if err != nil {
				return
			}
			if m.Command != "" || len(m.Frames) != 2 || len(m.Frames[1]) != 8 {
				continue
			}
			from := binary.BigEndian.Uint64(m.Frames[1])
			switch requests.Add(1) {
			case 1: // the start-up replay: the one batch buffered, and the marker
				if c.WriteMessage(nil, seq(top-3), payload) != nil || c.WriteMessage(nil, end, nil) != nil {
					return
				}
			case 2: // the gap before live 2^64-1: up to the top, then the connection dies
				for _, s := range []uint64{top - 2, top - 1, top} {
					if c.WriteMessage(nil, seq(s), payload) != nil {
						return
					}
				}
				return
			default: // a retry
				for s := from; ; s++ {
					if c.WriteMessage(nil, seq(s), payload) != nil || s == top {
						break
					}
				}
				if c.WriteMessage(nil, end, nil) != nil {
					return
				}
			}
		}
	})
	stop := make(chan struct{})
	defer close(stop)
	pubEP := fakePub(t, func(nc net.Conn) {
		c, err := zmtp.Handshake(nc, "PUB", zmtp.DefaultLimits, time.Now().Add(5*time.Second))
		if err != nil {
			return
		}
		if _, err := c.Read(); err != nil { // the subscription
			return
		}
		if c.WriteMessage(nil, seq(top), payload) != nil {
			return
		}
		<-stop
	})
	sub, err := zmq.NewSubscriber(newIndex(t), "s", pubEP, zmq.SubscribeFrom(top-3),
		zmq.SubscribeReplay(replayEP), zmq.SubscribeResync(time.Hour))
	require.NoError(t, err)
	// Five batches reach the subscriber: four replayed, and the live 2^64-1, a duplicate.
	require.Eventually(t, func() bool { st := sub.Stats(); return st.Applied+st.Duplicates >= 5 }, 10*time.Second, time.Millisecond)
	require.NoError(t, sub.Close())
	st := sub.Stats()
	require.EqualValues(t, 4, st.Applied, "%+v", st)
	require.EqualValues(t, 4, st.Replayed, "%+v", st)
	require.EqualValues(t, 1, st.Duplicates, "only the live copy of 2^64-1: %+v", st)
	require.Zero(t, st.ReplayErrors, "%+v", st)
	require.Zero(t, st.Lost, "%+v", st)
	require.EqualValues(t, 2, requests.Load(), "no retry after batch 2^64-1")
	require.EqualValues(t, 1, conns.Load())
}
