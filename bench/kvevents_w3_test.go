package bench

import (
	"context"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents/zmq"
	"github.com/kvpage/kvpage/prefix/vllmhash"
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
// sha256_cbor (what a server in a vLLM fleet runs). It reports req/s, events per trace and
// cpu-s/trace, the process's CPU time per trace: on this shared machine wall time includes
// time spent descheduled, CPU time does not (see pool_cputime_test.go). With a publisher it
// counts every goroutine: the sender, ZeroMQ's, and the in-process subscriber draining
// the socket, which a real server does not pay.
func BenchmarkW3KVEvents(b *testing.B) {
	tr := NewW3Trace()
	hashers := []struct {
		name string
		opts func() []prefix.Option
	}{
		{"default-hash", func() []prefix.Option { return nil }},
		{"sha256cbor", func() []prefix.Option { return []prefix.Option{prefix.WithHasher(vllmhash.NewSHA256CBOR("42"))} }},
	}
	for _, h := range hashers {
		b.Run(h.name+"/no-events", func(b *testing.B) {
			b.ReportAllocs()
			var res w3Result
			var cpu, thread time.Duration
			for b.Loop() {
				b.StopTimer()
				m := w3KVManager(b, h.opts()...)
				b.StartTimer()
				var err error
				cpu0 := cpuTime()
				thread += kvOnThread(func() { res, err = runW3Steps(m, tr, func() {}, func() {}) })
				if err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - cpu0
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/trace")
			b.ReportMetric(thread.Seconds()/float64(b.N), "sched-cpu-s/trace")
			b.ReportMetric(float64(W3Requests)*float64(b.N)/b.Elapsed().Seconds(), "req/s")
			b.ReportMetric(res.HitRate(), "hit-rate")
		})
		// A vLLM engine step covers every running sequence, so its batch carries the events
		// of many of them; W3 runs one sequence at a time, so one flush per request gives
		// batches of the size a busy server's steps produce (about 18 events), while one
		// flush per operation gives batches of at most one event, 13 times as many.
		b.Run(h.name+"/batcher", func(b *testing.B) { benchW3Batcher(b, tr, h.opts) })
		b.Run(h.name+"/publisher", func(b *testing.B) { benchW3Publisher(b, tr, h.opts, false) })
		b.Run(h.name+"/publisher-per-step", func(b *testing.B) { benchW3Publisher(b, tr, h.opts, true) })
	}
}

func benchW3Publisher(b *testing.B, tr *W3Trace, opts func() []prefix.Option, perStep bool) {
	b.ReportAllocs()
	var res w3Result
	var st zmq.PublisherStats
	var events uint64
	var cpu, thread time.Duration
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
		cpu0 := cpuTime()
		thread += kvOnThread(func() { res, err = runW3Steps(m, tr, step, flush) })
		if err != nil {
			b.Fatal(err)
		}
		require.NoError(b, pub.Close())
		cpu += cpuTime() - cpu0
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
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/trace")
	b.ReportMetric(thread.Seconds()/float64(b.N), "sched-cpu-s/trace")
}

// benchW3Batcher is what the scheduler's goroutine pays for events: encoding them and
// sealing a batch per request, with no queue, socket or other goroutine.
func benchW3Batcher(b *testing.B, tr *W3Trace, opts func() []prefix.Option) {
	b.ReportAllocs()
	var cpu, thread time.Duration
	var res w3Result
	for b.Loop() {
		b.StopTimer()
		bt := newBatcher(b)
		m := w3KVManager(b, append(opts(), prefix.WithObserver(bt))...)
		out := make([]byte, 0, 1<<20)
		b.StartTimer()
		cpu0 := cpuTime()
		var err error
		thread += kvOnThread(func() {
			res, err = runW3Steps(m, tr, func() {}, func() { out = bt.AppendBatch(out[:0], 1) })
		})
		if err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - cpu0
	}
	b.ReportMetric(thread.Seconds()/float64(b.N), "sched-cpu-s/trace")
	b.ReportMetric(float64(W3Requests)*float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(res.HitRate(), "hit-rate")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/trace")
}

// countingObserver counts the index's events on their way to the publisher.
type countingObserver struct {
	next   prefix.Observer
	events uint64
}

func (c *countingObserver) BlockStored(e *prefix.BlockStored)   { c.events++; c.next.BlockStored(e) }
func (c *countingObserver) BlockRemoved(e *prefix.BlockRemoved) { c.events++; c.next.BlockRemoved(e) }
func (c *countingObserver) AllBlocksCleared()                   { c.events++; c.next.AllBlocksCleared() }

// BenchmarkW3KVEventsOverhead measures what publishing adds to W3 as a ratio, robust to
// this shared machine's load: each iteration runs the trace without events and with a
// Publisher (flushed per request), back to back, in alternating order, and the reported
// figures are medians over iterations of the per-pair increase in the CPU time of the
// scheduler's own thread (sched-overhead-%: what the allocator's goroutine pays, including
// its slowdown by the other goroutines sharing the machine's two vCPUs), of the whole
// process (process-overhead-%: the sender's encoding, ZeroMQ, and the subscriber if any),
// and of wall time (wall-overhead-%, the queue's drain at Close included). With "drained",
// a plain ZeroMQ subscriber in the same process reads every batch over loopback TCP; with
// "no-subscriber", the PUB socket has no peer, so the figures leave the network and the
// reader out; "a-a" is the control, both runs without events, which shows what the method
// reads when there is nothing to find. Run it with -benchtime Nx for N pairs. The two runs carry the profiler
// label run=plain or run=published, so that with -cpuprofile the scheduler goroutine's
// extra work can be read function by function (go tool pprof -tagfocus run=published).
func BenchmarkW3KVEventsOverhead(b *testing.B) {
	tr := NewW3Trace()
	for _, h := range []struct {
		name string
		opts func() []prefix.Option
	}{
		{"sha256cbor", func() []prefix.Option { return []prefix.Option{prefix.WithHasher(vllmhash.NewSHA256CBOR("42"))} }},
		{"default-hash", func() []prefix.Option { return nil }},
	} {
		for _, mode := range []string{"drained", "no-subscriber", "a-a"} {
			b.Run(h.name+"/"+mode, func(b *testing.B) {
				var sched, proc, wall []float64
				pairs := 0
				for b.Loop() {
					b.StopTimer()
					plain := w3KVManager(b, h.opts()...)
					var pub *zmq.Publisher
					drain, flush, closePub := func() {}, func() {}, func() error { return nil }
					var published *blocktable.Manager
					switch mode {
					case "drained":
						pub, drain = newDrainedPublisher(b)
					case "no-subscriber":
						var err error
						pub, err = zmq.NewPublisher("tcp://127.0.0.1:0")
						require.NoError(b, err)
					}
					if pub != nil {
						published = w3KVManager(b, append(h.opts(), prefix.WithObserver(pub))...)
						flush = func() { pub.Flush() }
						closePub = pub.Close
					} else {
						published = w3KVManager(b, h.opts()...) // a-a: the control
					}
					runPlain := func() (thread, proc, wall time.Duration) {
						var err error
						p0, w0 := cpuTime(), time.Now()
						kvLabelled("plain", func() {
							thread = kvOnThread(func() { _, err = runW3Steps(plain, tr, func() {}, func() {}) })
						})
						proc, wall = cpuTime()-p0, time.Since(w0)
						require.NoError(b, err)
						return
					}
					runPublished := func() (thread, proc, wall time.Duration) {
						var err error
						p0, w0 := cpuTime(), time.Now()
						kvLabelled("published", func() {
							thread = kvOnThread(func() { _, err = runW3Steps(published, tr, func() {}, flush) })
						})
						require.NoError(b, err)
						require.NoError(b, closePub()) // the queue's drain included
						proc, wall = cpuTime()-p0, time.Since(w0)
						return
					}
					// Alternate which run goes first, so that neither always inherits the
					// other's garbage, heap growth or caches.
					var t0, p0, w0, t1, p1, w1 time.Duration
					if pairs%2 == 0 {
						t0, p0, w0 = runPlain()
						t1, p1, w1 = runPublished()
					} else {
						t1, p1, w1 = runPublished()
						t0, p0, w0 = runPlain()
					}
					pairs++
					drain()
					sched = append(sched, 100*(t1.Seconds()/t0.Seconds()-1))
					proc = append(proc, 100*(p1.Seconds()/p0.Seconds()-1))
					wall = append(wall, 100*(w1.Seconds()/w0.Seconds()-1))
					b.StartTimer()
				}
				b.ReportMetric(kvMedian(sched), "sched-overhead-%")
				b.ReportMetric(kvMedian(proc), "process-overhead-%")
				b.ReportMetric(kvMedian(wall), "wall-overhead-%")
			})
		}
	}
}

// kvLabelled runs f with the profiler label run=name, so that a CPU profile
// (-cpuprofile) shows the scheduler goroutine's own samples of each run apart:
// go tool pprof -tagfocus run=published -top.
func kvLabelled(name string, f func()) {
	pprof.Do(context.Background(), pprof.Labels("run", name), func(context.Context) { f() })
}

func kvMedian(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
