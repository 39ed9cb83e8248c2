package kvevents

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvpage/kvpage/internal/argerr"
	"github.com/kvpage/kvpage/prefix"
)

// Sink is a transport's side of a Recorder: it puts sealed batches on the wire. The
// Recorder calls Send from its sender goroutine only, in sequence order, with the batch's
// msgpack payload, which from then on belongs to the sink and is never written again (a
// transport may keep it for replay). Send must return in bounded time whatever the
// network does: a slow peer is the transport's to drop, never the Recorder's to wait on.
type Sink interface {
	Send(seq uint64, payload []byte) error
}

// Recorder is the transport-independent half of a publisher: a prefix.Observer that keeps
// the index's events and hands sealed, numbered, encoded batches to a Sink. The observer
// side runs on the index's goroutine and never waits on the network, nor even encodes:
// each event is copied into the open batch as it is (its hashes and tokens with a memmove
// each); Flush stamps the batch with the time and the next sequence number and hands it to
// a bounded queue without blocking. When every queue slot is taken the batch is dropped and
// counted (its sequence number is still used, so subscribers see the gap). A sender
// goroutine encodes each queued batch (with a Batcher) and calls the Sink.
//
// Call Flush once per scheduler step, as vLLM publishes one batch per engine step; a batch
// is also sealed automatically when it reaches WithMaxBatchEvents events. Observer methods,
// Flush and Close must be called from one goroutine (the index's); Stats from any.
type Recorder struct {
	cfg    config
	sink   Sink
	cur    *recording // the open batch (observer side)
	seq    uint64     // next sequence number (observer side)
	closed bool       // observer side

	free  freeList
	queue chan *recording

	batcher    *Batcher  // the sender's
	replayer   replayer  // the sender's
	high       highWater // the sender's
	senderDone chan struct{}

	sealed, published, droppedBatches, droppedEvents, sendErrors, refused counter
}

var _ prefix.Observer = (*Recorder)(nil)

// counter is a statistic written by one goroutine and read by any.
type counter struct{ v atomic.Uint64 }

func (c *counter) add(n uint64) { c.v.Add(n) }
func (c *counter) get() uint64  { return c.v.Load() }

// RecorderStats counts what a Recorder did. Every sealed batch is counted exactly once in
// Published, DroppedBatches or SendErrors, once the sender has dealt with it.
type RecorderStats struct {
	// Sealed counts batches sealed by Flush (or automatically), dropped ones included.
	Sealed uint64
	// Published counts batches the Sink accepted.
	Published uint64
	// DroppedBatches and DroppedEvents count what was dropped because the queue was full
	// (and DroppedEvents also events observed after Close).
	DroppedBatches, DroppedEvents uint64
	// SendErrors counts batches the Sink refused.
	SendErrors uint64
	// RefusedEvents counts events left out of their batch because a Decoder would refuse
	// the batch holding them (see Batcher.Refused).
	RefusedEvents uint64
}

// ErrInvalidArgument is wrapped by the errors returned for bad arguments: a nil Sink, a
// queue or a batch size over its limit. It matches (errors.Is) blocks.ErrInvalidArgument
// and every other package's invalid-argument sentinel, and they match it.
var ErrInvalidArgument = argerr.New("kvevents: invalid argument")

// ErrNilSink is returned by NewRecorder without a Sink; it wraps ErrInvalidArgument.
var ErrNilSink = fmt.Errorf("%w: nil sink", ErrInvalidArgument)

// MaxQueue bounds WithQueue and WithMaxBatchEvents: the queue's slots are allocated up
// front (vLLM's queue holds 100,000 batches).
const MaxQueue = 1 << 20

// NewRecorder returns a Recorder that hands its batches to sink, and starts its sender
// goroutine. Of the options, all apply: the encoding ones, WithQueue, WithMaxBatchEvents,
// WithFirstSeq and WithTimestamps.
func NewRecorder(sink Sink, opts ...Option) (*Recorder, error) {
	if sink == nil {
		return nil, ErrNilSink
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.queueBatches > MaxQueue || cfg.maxBatchEvents > MaxQueue {
		return nil, fmt.Errorf("%w: queue of %d batches, %d events a batch (at most %d each)", ErrInvalidArgument, cfg.queueBatches, cfg.maxBatchEvents, MaxQueue)
	}
	r := &Recorder{
		cfg:        cfg,
		sink:       sink,
		batcher:    newBatcher(cfg),
		cur:        new(recording),
		seq:        cfg.firstSeq,
		free:       freeList{stack: make([]*recording, 0, cfg.queueBatches)},
		queue:      make(chan *recording, cfg.queueBatches),
		senderDone: make(chan struct{}),
	}
	// As many recordings as queue slots: a Flush that finds a free one finds a free slot,
	// and one that finds none drops the batch instead of waiting.
	for range cfg.queueBatches {
		r.free.put(new(recording))
	}
	go r.send()
	return r, nil
}

// BlockStored copies the event into the open batch. After Close events are dropped and
// counted; an event a Decoder would refuse (see Batcher.Refused) is left out and counted
// in RefusedEvents.
func (r *Recorder) BlockStored(e *prefix.BlockStored) {
	if r.closed {
		r.droppedEvents.add(1)
		return
	}
	if !r.cfg.storable(e) {
		r.refused.add(1)
		return
	}
	r.cur.blockStored(e)
	r.maybeFlush()
}

// BlockRemoved copies the event into the open batch, as BlockStored does.
func (r *Recorder) BlockRemoved(e *prefix.BlockRemoved) {
	if r.closed {
		r.droppedEvents.add(1)
		return
	}
	if !r.cfg.removable(e) {
		r.refused.add(1)
		return
	}
	r.cur.blockRemoved(e)
	r.maybeFlush()
}

// AllBlocksCleared adds the event to the open batch.
func (r *Recorder) AllBlocksCleared() {
	if r.closed {
		r.droppedEvents.add(1)
		return
	}
	r.cur.allBlocksCleared()
	r.maybeFlush()
}

func (r *Recorder) maybeFlush() {
	if len(r.cur.events) >= r.cfg.maxBatchEvents {
		r.Flush()
	}
}

// Flush seals the open batch, if it has any event, and queues it for the network without
// waiting: when the queue is full the batch is dropped and counted. It returns the batch's
// sequence number and whether a batch was sealed. After Close it does nothing.
func (r *Recorder) Flush() (seq uint64, sealed bool) {
	n := len(r.cur.events)
	if n == 0 || r.closed {
		return 0, false
	}
	seq = r.seq
	r.seq++
	r.sealed.add(1)
	if next := r.free.get(); next != nil {
		r.cur.seq, r.cur.ts = seq, r.cfg.now()
		r.queue <- r.cur // never blocks: a free recording means a free slot
		r.cur = next
	} else {
		r.cur.reset()
		r.droppedBatches.add(1)
		r.droppedEvents.add(uint64(n))
	}
	return seq, true
}

// LastSeq returns the sequence number of the last sealed batch, and false before the first.
func (r *Recorder) LastSeq() (uint64, bool) { return r.seq - 1, r.seq > r.cfg.firstSeq }

// send is the sender goroutine: it publishes queued batches in order.
//
// It does not wait on the queue while batches keep coming. A channel send that finds its
// receiver parked readies it on the sending goroutine, which then wakes an idle processor
// to run it (a futex call): done per batch, that put a system call and a thread wake-up
// on the index's goroutine for every Flush, the larger part of what publishing cost the
// scheduler's thread. So after each batch the sender polls: it takes whatever is queued,
// and when nothing is, sleeps senderPoll on a timer of its own; only after senderIdlePolls
// empty polls in a row does it park on the channel again, and the next Flush pays one
// wake-up. A batch waits at most about senderPoll longer than it would, far less than a
// scheduler step; the queue (default 8,192 batches) holds a poll's worth many times over.
func (r *Recorder) send() {
	defer close(r.senderDone)
	for {
		rec, ok := <-r.queue
		if !ok {
			return
		}
		r.publish(rec)
		for idle := 0; idle < senderIdlePolls; {
			select {
			case rec, ok := <-r.queue:
				if !ok {
					return
				}
				r.publish(rec)
				idle = 0
			default:
				idle++
				time.Sleep(senderPoll)
			}
		}
	}
}

// senderPoll and senderIdlePolls pace the sender's polling (see send): a stream of batches
// costs the sender about 1,000 timer wake-ups a second and the index's goroutine none; an
// idle publisher parks after 10 ms.
const (
	senderPoll      = time.Millisecond
	senderIdlePolls = 10
)

// publish encodes one recording, recycles it, and hands the batch to the sink.
func (r *Recorder) publish(rec *recording) {
	r.replayer.replay(rec, r.batcher)
	seq, ts := rec.seq, rec.ts
	r.high.observe(rec)
	rec.reset()
	rec.reserve(r.high)
	r.free.put(rec)
	// The sink may keep the payload (a replay buffer), so it must never be written again:
	// it is a copy of exactly the batch's size (make and copy together skip the zeroing),
	// while the Batcher encodes every batch into its own buffer, warm in cache and grown
	// once. Handing the Batcher's buffer on and starting a new one, sized like the last
	// batch plus a quarter, allocated 1.6 times the payload bytes (slack, and regrowth
	// when a batch was larger): more garbage, more GC cycles.
	sealed := r.batcher.seal(ts)
	payload := make([]byte, len(sealed))
	copy(payload, sealed)
	r.batcher.Discard()
	if err := r.sink.Send(seq, payload); err != nil {
		r.sendErrors.add(1)
		return
	}
	r.published.add(1)
}

// Stats returns the recorder's counters.
func (r *Recorder) Stats() RecorderStats {
	return RecorderStats{
		Sealed:         r.sealed.get(),
		Published:      r.published.get(),
		DroppedBatches: r.droppedBatches.get(),
		DroppedEvents:  r.droppedEvents.get(),
		SendErrors:     r.sendErrors.get(),
		RefusedEvents:  r.refused.get(),
	}
}

// Close flushes the open batch, hands everything queued to the sink, and stops the sender
// goroutine. It does not close the sink: the transport that owns it does, after Close.
// Closing twice is harmless.
func (r *Recorder) Close() error {
	if r.closed {
		return nil
	}
	r.Flush()
	r.closed = true
	close(r.queue)
	<-r.senderDone
	return nil
}

// freeList holds the recordings not in use, last in first out: the few that a steady
// stream keeps in flight are reused over and over, already grown to a batch's size and
// warm in cache, instead of every slot of the queue growing its own arenas in turn (which
// would make the allocator's goroutine allocate, and pay garbage-collection assists).
type freeList struct {
	mu    sync.Mutex
	stack []*recording
}

func (f *freeList) get() *recording {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.stack)
	if n == 0 {
		return nil
	}
	r := f.stack[n-1]
	f.stack[n-1] = nil
	f.stack = f.stack[:n-1]
	return r
}

func (f *freeList) put(r *recording) {
	f.mu.Lock()
	f.stack = append(f.stack, r)
	f.mu.Unlock()
}
