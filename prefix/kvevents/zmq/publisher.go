package zmq

import (
	"fmt"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// Publisher puts the prefix index's events on the wire as vLLM's ZmqEventPublisher does.
// It is a prefix.Observer (plug it in with prefix.WithObserver): a kvevents.Recorder, whose
// observer side runs on the index's goroutine and never waits on the network, sending on a
// PUB socket as the three frames [topic, sequence number (8 bytes big-endian), msgpack
// payload], and keeping the last batches in a bounded replay buffer that a ROUTER socket
// (WithReplay) serves to subscribers that missed some.
//
// No peer can block it or make it hold unbounded memory: every connection is handshaken
// on its own goroutine by a deadline, each subscriber has its own bounded queue (a batch
// that finds it full is dropped for that subscriber and counted) and a write deadline,
// the connections per socket are bounded, and Close returns within about the linger time
// whatever the peers do.
//
// Observer methods, Flush and Close must be called from one goroutine (the index's);
// Stats, Peers, Endpoint and ReplayEndpoint from any.
type Publisher struct {
	*kvevents.Recorder
	cfg config

	pub    *pubSocket
	replay *replaySocket // nil without WithReplay
	ring   *replayRing
	topic  []byte
	closed bool
}

var _ prefix.Observer = (*Publisher)(nil)

// PublisherStats counts what a Publisher did. Every sealed batch is in Published,
// DroppedBatches or SendErrors; every batch not written to a subscriber that was
// connected and subscribed when it was published is in SubscriberDrops.
type PublisherStats struct {
	kvevents.RecorderStats
	// Subscribers is the number of subscribers connected now.
	Subscribers int
	// SubscriberDrops counts batches dropped for one subscriber: its queue was full, or
	// its connection failed while they waited.
	SubscriberDrops uint64
	// Disconnects counts subscribers disconnected because a write failed or timed out.
	Disconnects uint64
	// HandshakeFailures counts connections, to either socket, that did not complete the
	// ZMTP handshake in time or correctly; RefusedConnections those closed at once
	// because the socket had WithMaxPeers connections.
	HandshakeFailures, RefusedConnections uint64
	// Replays counts well-formed replay requests received, ReplayErrors the answers that
	// could not be written.
	Replays, ReplayErrors uint64
}

// Upper bounds of the Publisher's sizes, checked by NewPublisher: the replay ring is
// allocated up front, a subscriber's queue when it connects.
const (
	MaxBuffer = 1 << 22
	MaxPeers  = 1 << 16
)

// NewPublisher binds a PUB socket at endpoint (for example "tcp://*:5557" as vLLM's
// default, or "tcp://127.0.0.1:0" for a port chosen by the system) and, with WithReplay, a
// ROUTER socket for replays, and starts the sender goroutine. Only tcp:// endpoints are
// supported. Sizes over MaxBuffer or MaxPeers are refused with an error wrapping
// kvevents.ErrInvalidArgument.
func NewPublisher(endpoint string, opts ...Option) (*Publisher, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.replayBatches > MaxBuffer || cfg.subscriberQueue > MaxBuffer || cfg.maxPeers > MaxPeers {
		return nil, fmt.Errorf("%w: replay buffer %d, subscriber queue %d (at most %d), %d peers (at most %d)",
			kvevents.ErrInvalidArgument, cfg.replayBatches, cfg.subscriberQueue, MaxBuffer, cfg.maxPeers, MaxPeers)
	}
	p := &Publisher{cfg: cfg, ring: newReplayRing(cfg.replayBatches), topic: []byte(cfg.topic)}
	var err error
	if p.pub, err = newPubSocket(endpoint, &p.cfg); err != nil {
		return nil, fmt.Errorf("kvevents/zmq: publisher: %w", err)
	}
	if cfg.replayEndpoint != "" {
		if p.replay, err = newReplaySocket(cfg.replayEndpoint, p.ring, &p.cfg); err != nil {
			_ = p.pub.close(0)
			return nil, fmt.Errorf("kvevents/zmq: replay socket: %w", err)
		}
	}
	if p.Recorder, err = kvevents.NewRecorder(sink{p}, cfg.events...); err != nil {
		p.closeSockets()
		return nil, err
	}
	return p, nil
}

// sink is the Publisher's kvevents.Sink: it keeps each batch for replay and queues it for
// every subscriber, never waiting.
type sink struct{ p *Publisher }

func (s sink) Send(seq uint64, payload []byte) error {
	p := s.p
	if p.cfg.sendHook != nil {
		p.cfg.sendHook()
	}
	p.ring.push(seq, payload)
	p.pub.send([][]byte{p.topic, seqBytes(seq), payload})
	return nil
}

// Endpoint returns the PUB socket's address as "tcp://host:port", with the port the
// system chose if endpoint asked for port 0.
func (p *Publisher) Endpoint() string { return p.pub.l.endpoint() }

// ReplayEndpoint returns the ROUTER socket's address, or "" without WithReplay.
func (p *Publisher) ReplayEndpoint() string {
	if p.replay == nil {
		return ""
	}
	return p.replay.l.endpoint()
}

// Stats returns the publisher's counters.
func (p *Publisher) Stats() PublisherStats {
	st := PublisherStats{
		RecorderStats:      p.Recorder.Stats(),
		Subscribers:        len(p.pub.peerStats()),
		SubscriberDrops:    p.pub.drops.get(),
		Disconnects:        p.pub.disconnects.get(),
		HandshakeFailures:  p.pub.l.handshakeFailures.get(),
		RefusedConnections: p.pub.l.refused.get(),
	}
	if p.replay != nil {
		st.Replays = p.replay.requests.get()
		st.ReplayErrors = p.replay.errors.get()
		st.HandshakeFailures += p.replay.l.handshakeFailures.get()
		st.RefusedConnections += p.replay.l.refused.get()
	}
	return st
}

// Peers returns what the publisher knows of each connected subscriber.
func (p *Publisher) Peers() []PeerStats { return p.pub.peerStats() }

// Close flushes the open batch, hands what is queued to the subscribers' queues, lets
// them drain for at most the linger time (WithLinger), and closes every connection. It
// returns in bounded time whatever the peers do; batches still queued for a subscriber
// then are counted in SubscriberDrops.
func (p *Publisher) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	_ = p.Recorder.Close()
	return p.closeSockets()
}

func (p *Publisher) closeSockets() error {
	err := p.pub.close(p.cfg.linger)
	if p.replay != nil {
		if rerr := p.replay.l.close(); err == nil {
			err = rerr
		}
	}
	return err
}
