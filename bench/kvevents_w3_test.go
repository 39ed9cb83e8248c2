package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// w3KVManager builds W3's stack (8,192 blocks with the null block, the prefix index, the
// Manager) with the given index options.
func w3KVManager(tb testing.TB, opts ...prefix.Option) *blocktable.Manager {
	pool, err := blocks.New(W3PoolBlocks, blocks.WithNullBlock())
	require.NoError(tb, err)
	x, err := prefix.New(pool, BlockSize, opts...)
	require.NoError(tb, err)
	m, err := blocktable.New(blocktable.Config{Pool: pool, Index: x, BlockSize: BlockSize})
	require.NoError(tb, err)
	return m
}

// runW3Steps drives W3 as runW3 does and calls step after every scheduler operation
// (admission, each decode step) and done after each finish, where a server publishes.
func runW3Steps(m *blocktable.Manager, tr *W3Trace, step, done func()) (w3Result, error) {
	req := blocktable.Request{MaxTokens: W3SystemTokens + W3UniqueTokens + W3OutputTokens}
	for i := range tr.Requests {
		rq := &tr.Requests[i]
		seq := blocktable.SeqID(i)
		req.Prompt = rq.Prompt
		if _, err := m.Admit(seq, &req); err != nil {
			return w3Result{}, err
		}
		step()
		for j := range rq.Output {
			if _, err := m.Append(seq, rq.Output[j:j+1], 0); err != nil {
				return w3Result{}, err
			}
			step()
		}
		if err := m.Finish(seq); err != nil {
			return w3Result{}, err
		}
		done()
	}
	st := m.Stats()
	return w3Result{HitTokens: st.HitTokens, PromptTokens: st.PromptTokens, Evictions: st.Evictions}, nil
}

// BenchmarkW3KVEvents is W3 (one iteration = the whole 20,000-request trace, as
// BenchmarkW3SharedPrompt) with and without a kvevents.Publisher observing the prefix
// index, flushed after every scheduler step as a vLLM server publishes once per engine
// step, over a loopback PUB socket with one subscriber draining it. Each pair uses the
// same hasher, so the difference is what publishing costs: the fast default, and vLLM's
// sha256_cbor (what a server in a vLLM fleet runs). It reports req/s and events per trace.
func BenchmarkW3KVEvents(b *testing.B) {
	tr := NewW3Trace()
	hashers := []struct {
		name string
		opts func() []prefix.Option
	}{
		{"default-hash", func() []prefix.Option { return nil }},
		{"sha256cbor", func() []prefix.Option { return []prefix.Option{prefix.WithHasher(kvevents.NewSHA256CBOR("42"))} }},
	}
	for _, h := range hashers {
		b.Run(h.name+"/no-events", func(b *testing.B) {
			b.ReportAllocs()
			var res w3Result
			for b.Loop() {
				b.StopTimer()
				m := w3KVManager(b, h.opts()...)
				b.StartTimer()
				var err error
				if res, err = runW3Steps(m, tr, func() {}, func() {}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(W3Requests)*float64(b.N)/b.Elapsed().Seconds(), "req/s")
			b.ReportMetric(res.HitRate(), "hit-rate")
		})
		// A vLLM engine step covers every running sequence, so its batch carries the events
		// of many of them; W3 runs one sequence at a time, so one flush per request gives
		// batches of the size a busy server's steps produce (about 18 events), while one
		// flush per operation gives batches of at most one event, 13 times as many.
		b.Run(h.name+"/publisher", func(b *testing.B) { benchW3Publisher(b, tr, h.opts, false) })
		b.Run(h.name+"/publisher-per-step", func(b *testing.B) { benchW3Publisher(b, tr, h.opts, true) })
	}
}

func benchW3Publisher(b *testing.B, tr *W3Trace, opts func() []prefix.Option, perStep bool) {
	b.ReportAllocs()
	var res w3Result
	var st kvevents.PublisherStats
	var events uint64
	for b.Loop() {
		b.StopTimer()
		pub, drain := newDrainedPublisher(b)
		counter := &countingObserver{next: pub}
		m := w3KVManager(b, append(opts(), prefix.WithObserver(counter))...)
		flush := func() { pub.Flush() }
		step := func() {}
		if perStep {
			step = flush
		}
		b.StartTimer()
		var err error
		if res, err = runW3Steps(m, tr, step, flush); err != nil {
			b.Fatal(err)
		}
		require.NoError(b, pub.Close())
		b.StopTimer()
		st, events = pub.Stats(), counter.events
		drain()
		b.StartTimer()
	}
	b.ReportMetric(float64(W3Requests)*float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(res.HitRate(), "hit-rate")
	b.ReportMetric(float64(events), "events")
	b.ReportMetric(float64(st.Published), "batches")
	b.ReportMetric(float64(st.DroppedEvents), "dropped-events")
}

// countingObserver counts the index's events on their way to the publisher.
type countingObserver struct {
	next   prefix.Observer
	events uint64
}

func (c *countingObserver) BlockStored(e *prefix.BlockStored)   { c.events++; c.next.BlockStored(e) }
func (c *countingObserver) BlockRemoved(e *prefix.BlockRemoved) { c.events++; c.next.BlockRemoved(e) }
func (c *countingObserver) AllBlocksCleared()                   { c.events++; c.next.AllBlocksCleared() }
