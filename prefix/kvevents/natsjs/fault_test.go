package natsjs_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents/natsjs"
)

// TestNATSDisconnect kills the NATS server mid-stream and starts it again on the same
// storage: publishing never blocks the server meanwhile, every batch is either applied
// or counted lost by sequence number, and the stream carries on after the restart.
func TestNATSDisconnect(t *testing.T) {
	srv := startOwnNATS(t)
	nc, js := connect(t, srv.url)
	sc := testStream(t, js)
	a := newServer(t, nc, "a", sc, 1)
	idx := &countingIndex{inner: newFleetIndex(t)}
	sub := subscribe(t, js, idx, "r1", sc, true)
	defer sub.Close()

	var last uint64
	for i := range 5 {
		last = a.serve(t, seqTokens(int32(100*i), int32(100*i+8)))
	}
	waitFor(t, sub, a.pub, last)

	srv.Stop()
	for i := 5; i < 10; i++ { // while NATS is down
		last = a.serve(t, seqTokens(int32(100*i), int32(100*i+8)))
	}
	srv.Restart(t)
	require.Eventually(t, func() bool { return nc.Status() == nats.CONNECTED }, 10*time.Second, 10*time.Millisecond)
	// A batch in flight when NATS went down may never be stored (its acknowledgement
	// times out) and one sent just after the restart may find JetStream not ready yet:
	// the publisher counts them; the subscriber counts the gap once a later batch arrives.
	// So keep serving until a batch gets through.
	var got bool
	for i := 10; i < 25 && !got; i++ {
		last = a.serve(t, seqTokens(int32(100*i), int32(100*i+8)))
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		got = sub.WaitFor(ctx, "a", a.pub.Epoch(), last) == nil
		cancel()
	}
	require.True(t, got, "%+v %+v", sub.Stats(), a.pub.Stats())
	st := sub.Stats()
	require.Equal(t, last+1, st.Applied+st.Lost, "every sequence number up to the last is applied or counted lost: %+v", st)
	require.GreaterOrEqual(t, st.Applied, uint64(6), "%+v", st)
	ps := a.pub.Stats()
	require.Equal(t, last+1, ps.Sealed)
	require.Zero(t, ps.DroppedBatches, "the scheduler's side never waited on NATS")

	// What was applied is in the index: the last prompt routes to a.
	require.Equal(t, []cluster.ServerHit{{Server: "a", Blocks: 2}}, hitsOf(t, idx.inner, seqTokens(int32(100*(last)), int32(100*last+8))))
}

// TestSlowConsumer: a router that applies slowly falls behind without making the
// publisher drop anything; the stream holds the backlog and every batch arrives, in order.
func TestSlowConsumer(t *testing.T) {
	nc, js := shared(t)
	sc := testStream(t, js)
	a := newServer(t, nc, "a", sc, 1)
	idx := &countingIndex{inner: newFleetIndex(t), slow: 2 * time.Millisecond}
	sub, err := natsjs.NewSubscriber(t.Context(), js, idx, natsjs.SubscriberConfig{Replica: "slow", Stream: sc, FromStart: true, MaxAckPending: 4})
	require.NoError(t, err)
	defer sub.Close()
	var last uint64
	for i := range 200 {
		last = a.serve(t, seqTokens(int32(20*i), int32(20*i+8)))
	}
	waitFor(t, sub, a.pub, last)
	st := sub.Stats()
	require.Equal(t, uint64(200), st.Applied)
	require.Zero(t, st.Lost)
	ps := a.pub.Stats()
	require.Zero(t, ps.DroppedBatches+ps.Refused+ps.Failed, "%+v", ps)
}

// TestIndexRefusesThenTakes: while the index refuses batches (Redis down), the
// subscriber retries the same batch, and the server's later batches wait behind it.
func TestIndexRefusesThenTakes(t *testing.T) {
	nc, js := shared(t)
	sc := testStream(t, js)
	a := newServer(t, nc, "a", sc, 1)
	idx := &countingIndex{inner: newFleetIndex(t)}
	idx.fail.Store(3)
	sub := subscribe(t, js, idx, "r1", sc, true)
	defer sub.Close()
	a.serve(t, seqTokens(0, 8))
	last := a.serve(t, seqTokens(100, 108))
	waitFor(t, sub, a.pub, last)
	st := sub.Stats()
	require.Equal(t, uint64(3), st.Retries)
	require.Equal(t, uint64(2), st.Applied)
	require.Equal(t, int64(2), idx.n.Load())
}

// TestServerRestartClearsItsEntries: a server that restarts (a new epoch) starts with an
// empty cache and sequence numbers from 0; the index forgets what its previous run held.
func TestServerRestartClearsItsEntries(t *testing.T) {
	nc, js := shared(t)
	sc := testStream(t, js)
	a := newServer(t, nc, "a", sc, 1)
	idx := newFleetIndex(t)
	sub := subscribe(t, js, idx, "r1", sc, true)
	defer sub.Close()
	waitFor(t, sub, a.pub, a.serve(t, seqTokens(0, 8)))
	require.NoError(t, a.pub.Close(time.Second))

	a2 := newServer(t, nc, "a", sc, 2)
	waitFor(t, sub, a2.pub, a2.serve(t, seqTokens(100, 108)))
	require.Equal(t, []cluster.ServerHit{{Server: "a", Blocks: 0}}, hitsOf(t, idx, seqTokens(0, 8)))
	require.Equal(t, []cluster.ServerHit{{Server: "a", Blocks: 2}}, hitsOf(t, idx, seqTokens(100, 108)))
	st := sub.Stats()
	require.Equal(t, uint64(1), st.Restarts)
	require.Zero(t, st.Lost)
}

// TestHostileMessages: whatever reaches the subjects, the subscriber skips what is not a
// batch of a valid server and carries on.
func TestHostileMessages(t *testing.T) {
	nc, js := shared(t)
	sc := testStream(t, js)
	idx := &countingIndex{inner: newFleetIndex(t)}
	sub, err := natsjs.NewSubscriber(t.Context(), js, idx, natsjs.SubscriberConfig{Replica: "r1", Stream: sc, FromStart: true, MaxPayload: 4096})
	require.NoError(t, err)
	defer sub.Close()
	pub := func(subject string, data []byte, seq, epoch string) {
		m := nats.NewMsg(subject)
		m.Data = data
		if seq != "" {
			m.Header.Set(natsjs.HeaderSeq, seq)
		}
		if epoch != "" {
			m.Header.Set(natsjs.HeaderEpoch, epoch)
		}
		_, err := js.PublishMsg(t.Context(), m)
		require.NoError(t, err)
	}
	pub(sc.Subject+".a", []byte{0x93, 0xc1}, "0", "1")                   // not msgpack
	pub(sc.Subject+".a", []byte{0x90}, "", "1")                          // no sequence number
	pub(sc.Subject+".a", []byte{0x90}, "x", "1")                         // bad sequence number
	pub(sc.Subject+".a", []byte{0x90}, "1", "")                          // no epoch
	pub(sc.Subject+".a.b", []byte{0x90}, "1", "1")                       // not one subject token
	pub(sc.Subject+".a", make([]byte, 5000), "1", "1")                   // over MaxPayload
	pub(sc.Subject+".a", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, "1", "1") // declares 4G elements
	a := newServer(t, nc, "b", sc, 1)
	waitFor(t, sub, a.pub, a.serve(t, seqTokens(0, 8)))
	st := sub.Stats()
	require.Equal(t, uint64(7), st.Malformed, "%+v", st)
	require.Equal(t, uint64(1), st.Applied)
}
