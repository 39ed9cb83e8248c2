package kvevents

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvpage/kvpage/prefix"
)

// Publisher puts the prefix index's events on the wire as vLLM's ZmqEventPublisher does.
// It is a prefix.Observer (plug it in with prefix.WithObserver). The observer side runs on
// the index's goroutine and never waits on the network, nor even encodes: each event is
// copied into the open batch as it is (its hashes and tokens with a memmove each); Flush
// stamps the batch with the time and the next sequence number and hands it to a bounded
// queue without blocking. When every queue slot is taken the batch is dropped and counted
// (its sequence number is still used, so subscribers see the gap). A sender goroutine
// encodes each queued batch (with a Batcher) and publishes it on a ZeroMQ PUB socket as
// the three frames [topic, sequence number (8 bytes big-endian), msgpack payload], and
// keeps the last ones in a bounded replay buffer that a ROUTER socket (WithReplay) serves
// to subscribers that missed some.
//
// Call Flush once per scheduler step, as vLLM publishes one batch per engine step; a batch
// is also sealed automatically when it reaches WithMaxBatchEvents events. Observer methods,
// Flush and Close must be called from one goroutine (the index's); Stats, Endpoint and
// ReplayEndpoint from any.
type Publisher struct {
	cfg    config
	cur    *recording // the open batch (observer side)
	seq    uint64     // next sequence number (observer side)
	closed bool       // observer side

	free  freeList
	queue chan *recording

	batcher  *Batcher  // the sender's
	replayer replayer  // the sender's
	high     highWater // the sender's

	pub, router zmq4.Socket
	cancel      context.CancelFunc
	ring        *replayRing
	topic       []byte
	wg          sync.WaitGroup // the replay goroutine
	senderDone  chan struct{}

	sealed, published, droppedBatches, droppedEvents, sendErrors, replays counter
}

var _ prefix.Observer = (*Publisher)(nil)

// counter is a statistic written by one goroutine and read by any.
type counter struct{ v atomic.Uint64 }

func (c *counter) add(n uint64) { c.v.Add(n) }
func (c *counter) get() uint64  { return c.v.Load() }

// PublisherStats counts what a Publisher did.
type PublisherStats struct {
	// Sealed counts batches sealed by Flush (or automatically), dropped ones included.
	Sealed uint64
	// Published counts batches handed to the PUB socket.
	Published uint64
	// DroppedBatches and DroppedEvents count what was dropped because the queue was full
	// (and DroppedEvents also events observed after Close).
	DroppedBatches, DroppedEvents uint64
	// SendErrors counts batches the PUB socket refused.
	SendErrors uint64
	// Replays counts well-formed replay requests received.
	Replays uint64
}

// NewPublisher binds a PUB socket at endpoint (for example "tcp://*:5557" as vLLM's
// default, or "tcp://127.0.0.1:0" for a port chosen by the system) and, with WithReplay, a
// ROUTER socket for replays, and starts the sender goroutine.
func NewPublisher(endpoint string, opts ...Option) (*Publisher, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Publisher{
		batcher: newBatcher(cfg),
		cfg:     cfg,
		cur:     new(recording),
		free:    freeList{stack: make([]*recording, 0, cfg.queueBatches)},
		queue:   make(chan *recording, cfg.queueBatches),
		pub:     zmq4.NewPub(ctx),
		cancel:  cancel,
		ring:    newReplayRing(cfg.replayBatches),
		topic:   []byte(cfg.topic),

		senderDone: make(chan struct{}),
	}
	// As many recordings as queue slots: a Flush that finds a free one finds a free slot,
	// and one that finds none drops the batch instead of waiting.
	for range cfg.queueBatches {
		p.free.put(new(recording))
	}
	// Bound the PUB socket's own queue as vLLM bounds it (its hwm): past it the socket
	// drops the newest messages, which the replay buffer still holds, so subscribers see
	// the gap and fetch them. go-zeromq's queue is otherwise unbounded.
	if err := p.pub.SetOption(zmq4.OptionHWM, cfg.replayBatches); err != nil {
		cancel()
		return nil, fmt.Errorf("kvevents: publisher: %w", err)
	}
	if err := p.pub.Listen(endpoint); err != nil {
		cancel()
		return nil, fmt.Errorf("kvevents: publisher: %w", err)
	}
	if cfg.replayEndpoint != "" {
		p.router = zmq4.NewRouter(ctx)
		if err := p.router.Listen(cfg.replayEndpoint); err != nil {
			p.pub.Close()
			cancel()
			return nil, fmt.Errorf("kvevents: replay socket: %w", err)
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			serveReplay(p.router, p.ring, &p.replays)
		}()
	}
	go p.send()
	return p, nil
}

// Endpoint returns the PUB socket's address as "tcp://host:port", with the port the
// system chose if endpoint asked for port 0.
func (p *Publisher) Endpoint() string { return "tcp://" + p.pub.Addr().String() }

// ReplayEndpoint returns the ROUTER socket's address, or "" without WithReplay.
func (p *Publisher) ReplayEndpoint() string {
	if p.router == nil {
		return ""
	}
	return "tcp://" + p.router.Addr().String()
}

// BlockStored copies the event into the open batch. After Close events are dropped and
// counted.
func (p *Publisher) BlockStored(e *prefix.BlockStored) {
	if p.closed {
		p.droppedEvents.add(1)
		return
	}
	p.cur.blockStored(e)
	p.maybeFlush()
}

// BlockRemoved copies the event into the open batch.
func (p *Publisher) BlockRemoved(e *prefix.BlockRemoved) {
	if p.closed {
		p.droppedEvents.add(1)
		return
	}
	p.cur.blockRemoved(e)
	p.maybeFlush()
}

// AllBlocksCleared adds the event to the open batch.
func (p *Publisher) AllBlocksCleared() {
	if p.closed {
		p.droppedEvents.add(1)
		return
	}
	p.cur.allBlocksCleared()
	p.maybeFlush()
}

func (p *Publisher) maybeFlush() {
	if len(p.cur.events) >= p.cfg.maxBatchEvents {
		p.Flush()
	}
}

// Flush seals the open batch, if it has any event, and queues it for the network without
// waiting: when the queue is full the batch is dropped and counted. It returns the batch's
// sequence number and whether a batch was sealed. After Close it does nothing.
func (p *Publisher) Flush() (seq uint64, sealed bool) {
	n := len(p.cur.events)
	if n == 0 || p.closed {
		return 0, false
	}
	seq = p.seq
	p.seq++
	p.sealed.add(1)
	if next := p.free.get(); next != nil {
		p.cur.seq, p.cur.ts = seq, p.cfg.now()
		p.queue <- p.cur // never blocks: a free recording means a free slot
		p.cur = next
	} else {
		p.cur.reset()
		p.droppedBatches.add(1)
		p.droppedEvents.add(uint64(n))
	}
	return seq, true
}

// LastSeq returns the sequence number of the last sealed batch, and false before the first.
func (p *Publisher) LastSeq() (uint64, bool) { return p.seq - 1, p.seq > 0 }

// send is the sender goroutine: it publishes queued batches in order and keeps them for
// replay.
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
func (p *Publisher) send() {
	defer close(p.senderDone)
	for {
		r, ok := <-p.queue
		if !ok {
			return
		}
		p.publish(r)
		for idle := 0; idle < senderIdlePolls; {
			select {
			case r, ok := <-p.queue:
				if !ok {
					return
				}
				p.publish(r)
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

// publish encodes one recording, recycles it, and puts the batch on the PUB socket and in
// the replay buffer.
func (p *Publisher) publish(r *recording) {
	if p.cfg.sendHook != nil {
		p.cfg.sendHook()
	}
	p.replayer.replay(r, p.batcher)
	seq, ts := r.seq, r.ts
	p.high.observe(r)
	r.reset()
	r.reserve(p.high)
	p.free.put(r)
	// The PUB socket sends asynchronously and the replay buffer keeps the payload, so it
	// must never be written again: it is a copy of exactly the batch's size (make and copy
	// together skip the zeroing), while the Batcher encodes every batch into its own
	// buffer, warm in cache and grown once. Handing the Batcher's buffer on and starting a
	// new one, sized like the last batch plus a quarter, allocated 1.6 times the payload
	// bytes (slack, and regrowth when a batch was larger): more garbage, more GC cycles.
	sealed := p.batcher.seal(ts)
	payload := make([]byte, len(sealed))
	copy(payload, sealed)
	p.batcher.Discard()
	p.ring.push(seq, payload)
	if err := p.pub.SendMulti(zmq4.NewMsgFrom(p.topic, seqBytes(seq), payload)); err != nil {
		p.sendErrors.add(1)
		return
	}
	p.published.add(1)
}

// Stats returns the publisher's counters.
func (p *Publisher) Stats() PublisherStats {
	return PublisherStats{
		Sealed:         p.sealed.get(),
		Published:      p.published.get(),
		DroppedBatches: p.droppedBatches.get(),
		DroppedEvents:  p.droppedEvents.get(),
		SendErrors:     p.sendErrors.get(),
		Replays:        p.replays.get(),
	}
}

// Close flushes the open batch, publishes what is queued, and closes the sockets. Batches
// the PUB socket had not yet written out may be lost, as with vLLM's linger of 0.
func (p *Publisher) Close() error {
	if p.closed {
		return nil
	}
	p.Flush()
	p.closed = true
	close(p.queue)
	<-p.senderDone
	err := closeSocket(p.pub)
	if p.router != nil {
		if rerr := closeSocket(p.router); err == nil {
			err = rerr
		}
	}
	p.cancel()
	p.wg.Wait() // the replay goroutine returns once its socket is closed
	return err
}

// closeSocket closes a ZeroMQ socket. A connection the peer closed first is not an error:
// the socket reports it as one when it closes its own end.
func closeSocket(s zmq4.Socket) error {
	if err := s.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
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
