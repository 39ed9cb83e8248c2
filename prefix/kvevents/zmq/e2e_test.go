package zmq_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/kvevents/zmq"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// e2eServer is one server of a fleet: a block manager over a pool and a prefix index that
// hashes as vLLM does and publishes its events over ZeroMQ on loopback.
type e2eServer struct {
	name  string
	index *prefix.Index
	mgr   *blocktable.Manager
	pub   *zmq.Publisher
	seq   blocktable.SeqID
}

const (
	e2eSeed      = "42"
	e2eBlockSize = 4
)

func newE2EServer(t *testing.T, name string) *e2eServer {
	t.Helper()
	var tick float64
	pub, err := zmq.NewPublisher("tcp://127.0.0.1:0",
		zmq.WithReplay("tcp://127.0.0.1:0"),
		zmq.WithTopic("kv@"+name+"@model"),
		zmq.WithEvents(kvevents.WithTimestamps(func() float64 { tick++; return tick })))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pub.Close()) })
	pool, err := blocks.New(64, blocks.WithNullBlock())
	require.NoError(t, err)
	index, err := prefix.New(pool, e2eBlockSize,
		prefix.WithHasher(vllmhash.NewSHA256CBOR(e2eSeed)), prefix.WithObserver(pub))
	require.NoError(t, err)
	mgr, err := blocktable.New(blocktable.Config{Pool: pool, Index: index, BlockSize: e2eBlockSize})
	require.NoError(t, err)
	return &e2eServer{name: name, index: index, mgr: mgr, pub: pub}
}

// serve runs one request to completion (its full blocks become cached) and publishes the
// step's events; it returns the batch's sequence number.
func (s *e2eServer) serve(t *testing.T, p *prefix.Prompt) uint64 {
	t.Helper()
	s.seq++
	_, err := s.mgr.Admit(s.seq, &blocktable.Request{Namespace: p.Namespace, Prompt: p.Tokens})
	require.NoError(t, err)
	require.NoError(t, s.mgr.Finish(s.seq))
	return s.flush(t)
}

func (s *e2eServer) flush(t *testing.T) uint64 {
	t.Helper()
	seq, ok := s.pub.Flush()
	require.True(t, ok, "the step produced events")
	return seq
}

func subscribe(t *testing.T, c *cluster.ClusterIndex, s *e2eServer, opts ...zmq.SubscriberOption) *zmq.Subscriber {
	t.Helper()
	opts = append([]zmq.SubscriberOption{
		zmq.SubscribeReplay(s.pub.ReplayEndpoint()),
		zmq.SubscribeResync(20 * time.Millisecond),
	}, opts...)
	sub, err := zmq.NewSubscriber(c, s.name, s.pub.Endpoint(), opts...)
	require.NoError(t, err)
	return sub
}

func waitFor(t *testing.T, sub *zmq.Subscriber, seq uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, sub.WaitFor(ctx, seq))
}

func route(t *testing.T, c *cluster.ClusterIndex, p *prefix.Prompt) (string, int) {
	t.Helper()
	srv, n, ok := c.Route(p)
	if !ok {
		return "", 0
	}
	return srv, n
}

func TestEndToEndRoutingOverZeroMQ(t *testing.T) {
	a, b := newE2EServer(t, "a"), newE2EServer(t, "b")
	fleet := newIndex(t)
	subA, subB := subscribe(t, fleet, a), subscribe(t, fleet, b)
	defer func() { require.NoError(t, subB.Close()) }()

	system := seqTokens(1000, 1024) // a 6-block system prompt
	chat := func(sys []int32, user int32) *prefix.Prompt {
		return &prefix.Prompt{Tokens: append(append([]int32(nil), sys...), seqTokens(user, user+6)...)}
	}
	other := seqTokens(5000, 5016)

	// Server a has served the system prompt, server b another one.
	waitFor(t, subA, a.serve(t, chat(system, 1)))
	waitFor(t, subB, b.serve(t, &prefix.Prompt{Tokens: other}))

	// A new chat with the same system prompt goes to a; the other prompt to b.
	srv, n := route(t, fleet, chat(system, 77))
	require.Equal(t, "a", srv)
	require.Equal(t, 6, n, "the system prompt's 6 blocks; the user turns differ")
	srv, n = route(t, fleet, &prefix.Prompt{Tokens: append(other, 9, 9, 9, 9)})
	require.Equal(t, "b", srv)
	require.Equal(t, 4, n)
	// The hashes on the wire are vLLM's: the router recomputes them from tokens alone.
	want := vllmhash.PromptHashes(vllmhash.NewSHA256CBOR(e2eSeed), &prefix.Prompt{Tokens: system}, e2eBlockSize)
	require.True(t, fleet.Holds("a", want[5]))
	require.Zero(t, fleet.Stats("a").RootMismatches)

	// Server a evicts everything: the index follows, and b gets the system prompt.
	require.Positive(t, a.index.Evict(1<<20))
	waitFor(t, subA, a.flush(t))
	_, n = route(t, fleet, chat(system, 77))
	require.Zero(t, n)
	require.Zero(t, fleet.Stats("a").Blocks)
	waitFor(t, subB, b.serve(t, chat(system, 2)))
	srv, n = route(t, fleet, chat(system, 77))
	require.Equal(t, "b", srv)
	require.Equal(t, 6, n)

	// Subscriber a goes away; a serves a new prompt meanwhile; a new subscriber that picks
	// up where the old one stopped catches up through the replay socket.
	resumeAt := subA.Stats().Next
	require.NoError(t, subA.Close())
	third := seqTokens(9000, 9012)
	missed := a.serve(t, &prefix.Prompt{Tokens: third})
	// The sender publishes within a poll of the Flush: wait for it, so that the batch
	// is really gone from the PUB socket's point of view before the new subscriber joins.
	waitPublished(t, a.pub, missed+1)
	subA2 := subscribe(t, fleet, a, zmq.SubscribeFrom(resumeAt))
	defer func() { require.NoError(t, subA2.Close()) }()
	waitFor(t, subA2, missed)
	srv, n = route(t, fleet, &prefix.Prompt{Tokens: third})
	require.Equal(t, "a", srv)
	require.Equal(t, 3, n)
	st := subA2.Stats()
	require.Positive(t, st.Replayed, "the missed batch came by replay")
	require.Zero(t, st.Lost)

	// A router that starts late learns the whole history from the replay buffers.
	late := newIndex(t)
	lateA, lateB := subscribe(t, late, a), subscribe(t, late, b)
	defer func() { require.NoError(t, lateA.Close()); require.NoError(t, lateB.Close()) }()
	lastA, _ := a.pub.LastSeq()
	lastB, _ := b.pub.LastSeq()
	waitFor(t, lateA, lastA)
	waitFor(t, lateB, lastB)
	for _, p := range []*prefix.Prompt{chat(system, 77), {Tokens: other}, {Tokens: third}} {
		require.Equal(t, match(t, fleet, p), match(t, late, p))
	}
	require.Equal(t, fleet.Stats("a").Blocks, late.Stats("a").Blocks)
	require.Zero(t, lateA.Stats().Lost)
	require.Zero(t, a.pub.Stats().DroppedBatches)
}
