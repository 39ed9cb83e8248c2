package zmq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvpage/kvpage/prefix/kvevents"
)

// Subscriber feeds one server's KV events into an index (a kvevents.Applier: a
// cluster.Index). It reads the server's PUB
// socket (vLLM's or a Publisher's: the framing is the same), checks the sequence numbers,
// and fills any gap from the server's replay socket before it applies what follows, so
// that the index sees every batch the server still buffers, once and in order. A gap the
// replay buffer cannot fill (batches the publisher dropped, or that left its buffer) is
// counted in Lost and skipped.
//
// At start, and whenever nothing has arrived for the resync interval, it asks for a replay
// from the next sequence number it expects: that catches up a subscriber that joined late
// (including batches published before its subscription reached the publisher, which a
// ZeroMQ PUB socket silently does not send it) and one whose last messages were lost.
//
// A Subscriber runs one goroutine; its methods are safe for concurrent use.
type Subscriber struct {
	index  kvevents.Applier
	server string
	sub    zmq4.Socket
	replay *replayClient
	resync time.Duration

	mu    sync.Mutex // guards next, synced, stats, dec, batch
	next  uint64
	stats SubscriberStats
	dec   kvevents.Decoder
	batch kvevents.Batch

	progress chan struct{} // signalled after each applied batch
	done     chan struct{}
	cancel   context.CancelFunc
}

// SubscriberStats counts what a Subscriber did.
type SubscriberStats struct {
	// Applied counts batches applied to the index, Replayed those of them that came
	// through the replay socket.
	Applied, Replayed uint64
	// Duplicates counts batches received twice (live and by replay) and applied once.
	Duplicates uint64
	// Lost counts sequence numbers that neither the live stream nor a replay delivered.
	Lost uint64
	// Malformed counts batches that failed to decode (skipped).
	Malformed uint64
	// ApplyErrors counts batches the index refused.
	ApplyErrors uint64
	// ReplayRequests and ReplayErrors count replay round trips and failed ones.
	ReplayRequests, ReplayErrors uint64
	// Next is the next sequence number the subscriber expects.
	Next uint64
}

// SubscriberOption configures a Subscriber.
type SubscriberOption func(*subscriberConfig)

type subscriberConfig struct {
	topic         string
	replay        string
	from          uint64
	resync        time.Duration
	replayTimeout time.Duration
}

// SubscribeTopic subscribes to topics starting with prefix (default "": all).
func SubscribeTopic(prefix string) SubscriberOption {
	return func(c *subscriberConfig) { c.topic = prefix }
}

// SubscribeReplay sets the server's replay (ROUTER) endpoint. Without it gaps are only
// counted.
func SubscribeReplay(endpoint string) SubscriberOption {
	return func(c *subscriberConfig) { c.replay = endpoint }
}

// SubscribeFrom sets the first sequence number wanted (default 0: everything the server
// still buffers).
func SubscribeFrom(seq uint64) SubscriberOption {
	return func(c *subscriberConfig) { c.from = seq }
}

// SubscribeResync sets how long the subscriber waits without a message before it asks for
// a replay (default 1 s; 0 disables the idle resync).
func SubscribeResync(d time.Duration) SubscriberOption {
	return func(c *subscriberConfig) { c.resync = d }
}

// SubscribeReplayTimeout bounds one replay round trip (default 2 s).
func SubscribeReplayTimeout(d time.Duration) SubscriberOption {
	return func(c *subscriberConfig) { c.replayTimeout = d }
}

// NewSubscriber connects to a server's PUB socket at endpoint and starts applying its
// events to index under the name server.
func NewSubscriber(index kvevents.Applier, server, endpoint string, opts ...SubscriberOption) (*Subscriber, error) {
	cfg := subscriberConfig{resync: time.Second, replayTimeout: 2 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Subscriber{
		index:    index,
		server:   server,
		sub:      zmq4.NewSub(ctx, zmq4.WithDialerMaxRetries(20), zmq4.WithDialerRetry(50*time.Millisecond)),
		resync:   cfg.resync,
		next:     cfg.from,
		progress: make(chan struct{}, 1),
		done:     make(chan struct{}),
		cancel:   cancel,
	}
	if cfg.replay != "" {
		s.replay = &replayClient{endpoint: cfg.replay, timeout: cfg.replayTimeout}
	}
	if err := s.sub.Dial(endpoint); err != nil {
		cancel()
		return nil, fmt.Errorf("kvevents/zmq: subscriber: %w", err)
	}
	if err := s.sub.SetOption(zmq4.OptionSubscribe, cfg.topic); err != nil {
		s.sub.Close()
		cancel()
		return nil, fmt.Errorf("kvevents/zmq: subscriber: %w", err)
	}
	if a, ok := index.(interface{ AddServer(string) }); ok {
		a.AddServer(server) // listed from the start, with no blocks
	}
	go s.run()
	return s, nil
}

func (s *Subscriber) run() {
	defer close(s.done)
	msgs := make(chan zmq4.Msg, 256)
	go func() {
		defer close(msgs)
		for {
			m, err := s.sub.Recv()
			if err != nil {
				return
			}
			msgs <- m
		}
	}()
	s.catchUp() // whatever was published before we connected
	var tick <-chan time.Time
	if s.resync > 0 {
		t := time.NewTicker(s.resync)
		defer t.Stop()
		tick = t.C
	}
	idle := false
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return
			}
			idle = false
			// [topic, seq (8 bytes big-endian), payload]
			if len(m.Frames) != 3 || len(m.Frames[1]) != 8 {
				s.mu.Lock()
				s.stats.Malformed++
				s.mu.Unlock()
				continue
			}
			s.receive(binary.BigEndian.Uint64(m.Frames[1]), m.Frames[2])
		case <-tick:
			if idle {
				s.catchUp()
			}
			idle = true
		}
	}
}

// receive handles one live batch: a duplicate is skipped, a gap is filled by replay first.
func (s *Subscriber) receive(seq uint64, payload []byte) {
	s.mu.Lock()
	gap := seq > s.next
	s.mu.Unlock()
	if gap {
		s.catchUp()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliver(seq, payload, false)
}

// deliver applies batch seq if it is the next one or later (counting what was skipped as
// lost). Called with s.mu held.
func (s *Subscriber) deliver(seq uint64, payload []byte, replayed bool) {
	if seq < s.next {
		s.stats.Duplicates++
		return
	}
	s.stats.Lost += seq - s.next
	s.next = seq + 1
	defer func() { // wake WaitFor whatever became of the batch
		select {
		case s.progress <- struct{}{}:
		default:
		}
	}()
	if err := s.dec.Decode(payload, &s.batch); err != nil {
		s.stats.Malformed++
		return
	}
	if err := s.index.Apply(s.server, &s.batch); err != nil {
		s.stats.ApplyErrors++
		return
	}
	s.stats.Applied++
	if replayed {
		s.stats.Replayed++
	}
}

// catchUp asks the replay socket for everything from the next expected batch on.
func (s *Subscriber) catchUp() {
	if s.replay == nil {
		return
	}
	s.mu.Lock()
	from := s.next
	s.stats.ReplayRequests++
	s.mu.Unlock()
	err := s.replay.replay(from, func(seq uint64, payload []byte) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.deliver(seq, payload, true)
	})
	if err != nil {
		s.mu.Lock()
		s.stats.ReplayErrors++
		s.mu.Unlock()
	}
}

// Stats returns the subscriber's counters.
func (s *Subscriber) Stats() SubscriberStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Next = s.next
	return st
}

// ErrTimeout is returned by WaitFor when the deadline passes first.
var ErrTimeout = errors.New("kvevents/zmq: timed out")

// WaitFor blocks until the subscriber has dealt with batch seq (applied it, or counted it
// lost) or ctx is done.
func (s *Subscriber) WaitFor(ctx context.Context, seq uint64) error {
	for {
		s.mu.Lock()
		next := s.next
		s.mu.Unlock()
		if next > seq {
			return nil
		}
		select {
		case <-s.progress:
		case <-s.done:
			return errors.New("kvevents/zmq: subscriber closed")
		case <-ctx.Done():
			return fmt.Errorf("%w waiting for batch %d (next is %d)", ErrTimeout, seq, next)
		}
	}
}

// Close stops the subscriber and closes its sockets.
func (s *Subscriber) Close() error {
	err := closeSocket(s.sub)
	s.cancel()
	<-s.done
	if s.replay != nil {
		s.replay.reset()
	}
	return err
}
