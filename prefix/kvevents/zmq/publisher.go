package zmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/go-zeromq/zmq4"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// Publisher puts the prefix index's events on the wire as vLLM's ZmqEventPublisher does.
// It is a prefix.Observer (plug it in with prefix.WithObserver): a kvevents.Recorder, whose
// observer side runs on the index's goroutine and never waits on the network, sending on a
// ZeroMQ PUB socket as the three frames [topic, sequence number (8 bytes big-endian),
// msgpack payload], and keeping the last batches in a bounded replay buffer that a ROUTER
// socket (WithReplay) serves to subscribers that missed some.
//
// Observer methods, Flush and Close must be called from one goroutine (the index's);
// Stats, Endpoint and ReplayEndpoint from any.
type Publisher struct {
	*kvevents.Recorder
	cfg config

	pub, router zmq4.Socket
	cancel      context.CancelFunc
	ring        *replayRing
	topic       []byte
	wg          sync.WaitGroup // the replay goroutine

	replays counter
}

var _ prefix.Observer = (*Publisher)(nil)

// counter is a statistic written by one goroutine and read by any.
type counter struct{ v atomic.Uint64 }

func (c *counter) add(n uint64) { c.v.Add(n) }
func (c *counter) get() uint64  { return c.v.Load() }

// PublisherStats counts what a Publisher did.
type PublisherStats struct {
	kvevents.RecorderStats
	// Replays counts well-formed replay requests received.
	Replays uint64
}

// Option configures a Publisher.
type Option func(*config)

type config struct {
	events         []kvevents.Option
	topic          string
	replayEndpoint string
	replayBatches  int
	sendHook       func() // tests: called by the sender before each batch
}

// WithEvents passes options to the publisher's kvevents.Recorder: the encoding, the queue,
// the batch size, the timestamps.
func WithEvents(opts ...kvevents.Option) Option {
	return func(c *config) { c.events = append(c.events, opts...) }
}

// WithTopic sets the topic frame of every published message (default "", as vLLM; llm-d's
// indexer expects "kv@<pod>@<model>").
func WithTopic(topic string) Option { return func(c *config) { c.topic = topic } }

// WithReplay binds a ROUTER socket at endpoint that answers replay requests from a buffer
// of the last batches (default 10,000 batches, as vLLM's buffer_steps; see
// WithReplayBuffer).
func WithReplay(endpoint string) Option { return func(c *config) { c.replayEndpoint = endpoint } }

// WithReplayBuffer sets how many of the last published batches the replay socket can
// resend (at least 1).
func WithReplayBuffer(batches int) Option {
	return func(c *config) { c.replayBatches = max(batches, 1) }
}

// NewPublisher binds a PUB socket at endpoint (for example "tcp://*:5557" as vLLM's
// default, or "tcp://127.0.0.1:0" for a port chosen by the system) and, with WithReplay, a
// ROUTER socket for replays, and starts the sender goroutine.
func NewPublisher(endpoint string, opts ...Option) (*Publisher, error) {
	cfg := config{replayBatches: 10000} // vLLM's buffer_steps default
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Publisher{
		cfg:    cfg,
		pub:    zmq4.NewPub(ctx),
		cancel: cancel,
		ring:   newReplayRing(cfg.replayBatches),
		topic:  []byte(cfg.topic),
	}
	// Bound the PUB socket's own queue as vLLM bounds it (its hwm): past it the socket
	// drops the newest messages, which the replay buffer still holds, so subscribers see
	// the gap and fetch them. go-zeromq's queue is otherwise unbounded.
	if err := p.pub.SetOption(zmq4.OptionHWM, cfg.replayBatches); err != nil {
		cancel()
		return nil, fmt.Errorf("kvevents/zmq: publisher: %w", err)
	}
	if err := p.pub.Listen(endpoint); err != nil {
		cancel()
		return nil, fmt.Errorf("kvevents/zmq: publisher: %w", err)
	}
	if cfg.replayEndpoint != "" {
		p.router = zmq4.NewRouter(ctx)
		if err := p.router.Listen(cfg.replayEndpoint); err != nil {
			p.pub.Close()
			cancel()
			return nil, fmt.Errorf("kvevents/zmq: replay socket: %w", err)
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			serveReplay(p.router, p.ring, &p.replays)
		}()
	}
	rec, err := kvevents.NewRecorder(sink{p}, cfg.events...)
	if err != nil {
		p.closeSockets()
		return nil, err
	}
	p.Recorder = rec
	return p, nil
}

// sink is the Publisher's kvevents.Sink: it keeps each batch for replay and sends it.
type sink struct{ p *Publisher }

func (s sink) Send(seq uint64, payload []byte) error {
	p := s.p
	if p.cfg.sendHook != nil {
		p.cfg.sendHook()
	}
	p.ring.push(seq, payload)
	return p.pub.SendMulti(zmq4.NewMsgFrom(p.topic, seqBytes(seq), payload))
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

// Stats returns the publisher's counters.
func (p *Publisher) Stats() PublisherStats {
	return PublisherStats{RecorderStats: p.Recorder.Stats(), Replays: p.replays.get()}
}

// Close flushes the open batch, publishes what is queued, and closes the sockets. Batches
// the PUB socket had not yet written out may be lost, as with vLLM's linger of 0.
func (p *Publisher) Close() error {
	if p.cancel == nil {
		return nil
	}
	_ = p.Recorder.Close()
	return p.closeSockets()
}

func (p *Publisher) closeSockets() error {
	err := closeSocket(p.pub)
	if p.router != nil {
		if rerr := closeSocket(p.router); err == nil {
			err = rerr
		}
	}
	p.cancel()
	p.cancel = nil
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
