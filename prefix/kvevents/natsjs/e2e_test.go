package natsjs_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/kvevents/natsjs"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

const (
	seed      = "42"
	blockSize = 4
)

// server is one kvpage server publishing its prefix index's events to JetStream.
type server struct {
	name string
	mgr  *blocktable.Manager
	pub  *natsjs.Publisher
	seq  blocktable.SeqID
}

func newServer(t *testing.T, nc *nats.Conn, name string, sc natsjs.StreamConfig, epoch uint64) *server {
	t.Helper()
	var tick float64
	pub, err := natsjs.NewPublisher(t.Context(), nc, natsjs.PublisherConfig{
		Server: name, Stream: sc, Epoch: epoch,
		Events: []kvevents.Option{kvevents.WithTimestamps(func() float64 { tick++; return tick })},
	})
	require.NoError(t, err)
	pool, err := blocks.New(256, blocks.WithNullBlock())
	require.NoError(t, err)
	index, err := prefix.New(pool, blockSize, prefix.WithHasher(vllmhash.NewSHA256CBOR(seed)), prefix.WithObserver(pub))
	require.NoError(t, err)
	mgr, err := blocktable.New(blocktable.Config{Pool: pool, Index: index, BlockSize: blockSize})
	require.NoError(t, err)
	return &server{name: name, mgr: mgr, pub: pub}
}

// serve runs one request to completion and publishes the step's batch.
func (s *server) serve(t *testing.T, toks []int32) uint64 {
	t.Helper()
	return s.serveNS(t, prefix.Namespace{}, toks)
}

func (s *server) serveNS(t *testing.T, ns prefix.Namespace, toks []int32) uint64 {
	t.Helper()
	s.seq++
	_, err := s.mgr.Admit(s.seq, &blocktable.Request{Namespace: ns, Prompt: toks})
	require.NoError(t, err)
	require.NoError(t, s.mgr.Finish(s.seq))
	seq, ok := s.pub.Flush()
	require.True(t, ok)
	return seq
}

func seqTokens(from, to int32) []int32 {
	out := make([]int32, 0, to-from)
	for v := from; v < to; v++ {
		out = append(out, v)
	}
	return out
}

func newFleetIndex(t *testing.T) *cluster.ClusterIndex {
	t.Helper()
	c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR(seed), blockSize)
	require.NoError(t, err)
	return c
}

func subscribe(t *testing.T, js jetstream.JetStream, idx kvevents.Applier, replica string, sc natsjs.StreamConfig, fromStart bool) *natsjs.Subscriber {
	t.Helper()
	sub, err := natsjs.NewSubscriber(t.Context(), js, idx, natsjs.SubscriberConfig{Replica: replica, Stream: sc, FromStart: fromStart, Retry: 10 * time.Millisecond})
	require.NoError(t, err)
	return sub
}

func waitFor(t *testing.T, sub *natsjs.Subscriber, pub *natsjs.Publisher, seq uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, sub.WaitFor(ctx, pub.Server(), pub.Epoch(), seq), "%+v", sub.Stats())
}

func hitsOf(t *testing.T, c cluster.Index, toks []int32) []cluster.ServerHit {
	t.Helper()
	h, err := c.Match(nil, &prefix.Prompt{Tokens: toks})
	require.NoError(t, err)
	return h
}

// TestRoutingOverJetStream: two servers, two router replicas with durable consumers of
// their own; both replicas learn every batch, and a replica that restarts with an empty
// index rebuilds it from the stream.
func TestRoutingOverJetStream(t *testing.T) {
	nc, js := shared(t)
	sc := testStream(t, js)
	a, b := newServer(t, nc, "a", sc, 1), newServer(t, nc, "b", sc, 1)
	sys := seqTokens(1000, 1024)
	other := seqTokens(5000, 5016)
	lastA := a.serve(t, append(append([]int32(nil), sys...), 1, 2, 3))
	lastB := b.serve(t, other)

	r1, r2 := newFleetIndex(t), newFleetIndex(t)
	s1 := subscribe(t, js, r1, "r1", sc, true)
	s2 := subscribe(t, js, r2, "r2", sc, true)
	for _, s := range []*natsjs.Subscriber{s1, s2} {
		waitFor(t, s, a.pub, lastA)
		waitFor(t, s, b.pub, lastB)
	}
	want := []cluster.ServerHit{{Server: "a", Blocks: 6}, {Server: "b", Blocks: 0}}
	require.Equal(t, want, hitsOf(t, r1, append(sys, 9)))
	require.Equal(t, want, hitsOf(t, r2, append(sys, 9)))

	// r1 restarts with an empty index and replays the stream from its start.
	require.NoError(t, s1.Close())
	lastB = b.serve(t, sys) // published while r1 is down
	r1 = newFleetIndex(t)
	s1 = subscribe(t, js, r1, "r1", sc, true)
	defer s1.Close()
	defer s2.Close()
	waitFor(t, s1, a.pub, lastA)
	waitFor(t, s1, b.pub, lastB)
	waitFor(t, s2, b.pub, lastB)
	want = []cluster.ServerHit{{Server: "a", Blocks: 6}, {Server: "b", Blocks: 6}}
	require.Equal(t, want, hitsOf(t, r1, append(sys, 9)))
	require.Equal(t, want, hitsOf(t, r2, append(sys, 9)))
	st := s1.Stats()
	require.Zero(t, st.Lost)
	require.Equal(t, uint64(3), st.Applied)
	ps := a.pub.Stats()
	require.Zero(t, ps.DroppedBatches+ps.Refused+ps.Failed)
}

// TestDurableConsumerResumes: a replica whose index survives (Redis) resumes after its
// last acknowledged batch: nothing is applied twice, nothing missed.
func TestDurableConsumerResumes(t *testing.T) {
	nc, js := shared(t)
	sc := testStream(t, js)
	a := newServer(t, nc, "a", sc, 7)
	idx := &countingIndex{inner: newFleetIndex(t)}
	s := subscribe(t, js, idx, "r1", sc, true)
	last := a.serve(t, seqTokens(0, 16))
	waitFor(t, s, a.pub, last)
	require.NoError(t, s.Close())
	a.serve(t, seqTokens(100, 116))
	last = a.serve(t, seqTokens(200, 216))
	s = subscribe(t, js, idx, "r1", sc, false)
	defer s.Close()
	waitFor(t, s, a.pub, last)
	require.Equal(t, int64(3), idx.n.Load(), "each batch applied once")
}

type countingIndex struct {
	inner *cluster.ClusterIndex
	n     atomic.Int64
	mu    sync.Mutex
	slow  time.Duration
	fail  atomic.Int64 // refuse this many applies
}

func (c *countingIndex) Apply(server string, b *kvevents.Batch) error {
	if c.fail.Load() > 0 {
		c.fail.Add(-1)
		return natsjs.ErrUnavailable
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	time.Sleep(c.slow)
	c.n.Add(1)
	return c.inner.Apply(server, b)
}
