package zmq

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"time"

	"github.com/kvpage/kvpage/internal/zmtp"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// Subscriber feeds one server's KV events into an index (a kvevents.Applier: a
// cluster.Index). It reads the server's PUB socket (vLLM's or a Publisher's: the framing
// is the same), checks the sequence numbers, and fills any gap from the server's replay
// socket before it applies what follows, so that the index sees every batch the server
// still buffers, once and in order. A gap the replay buffer cannot fill (batches the
// publisher dropped, or that left its buffer) is counted in Lost and skipped.
//
// At start, and whenever nothing has arrived for the resync interval, it asks for a replay
// from the next sequence number it expects: that catches up a subscriber that joined late
// (including batches published before its subscription reached the publisher, which a
// PUB socket silently does not send it) and one whose last messages were lost. When the
// connection fails it reconnects, pausing longer after each failure.
//
// A server that restarts numbers its batches from 0 again (vLLM's publisher and a
// Publisher alike), with an empty cache. A publisher's live stream never goes back, and a
// new connection carries only batches published after its subscription, so the first
// batch of a connection numbered below the next one expected when it was dialled (or any,
// after batch 2^64-1) is a restart, not a duplicate: the
// subscriber clears the server's blocks from the index (an AllBlocksCleared), counts it in
// Restarts, and takes the new stream from 0, replaying what the server buffered before
// it. (Counted as duplicates, the restarted server's batches were dropped until its
// numbers passed the old ones, and its old blocks stayed in the index.) A restart that
// publishes past the old numbers before the subscriber reconnects cannot be told from a
// gap: a process that replaces its publisher but keeps its cache continues the numbering
// (kvevents.WithFirstSeq) instead.
//
// What the server sends is bounded: the handshake has a deadline, messages a size cap
// (SubscribeMaxMessage), a message once begun must be complete within the handshake
// timeout, and the decoder bounds the rest (see kvevents.Decoder).
//
// A Subscriber runs its own goroutines; its methods are safe for concurrent use, and
// Close returns in bounded time whatever the server does.
type Subscriber struct {
	index  kvevents.Applier
	server string
	cfg    subscriberConfig
	addr   string
	topic  []byte
	replay *replayClient

	mu        sync.Mutex // guards next, exhausted, stats, dec, batch
	next      uint64
	exhausted bool // batch 2^64-1 was delivered: no later one can be
	stats     SubscriberStats
	dec       kvevents.Decoder
	batch     kvevents.Batch

	connMu sync.Mutex
	conn   net.Conn // the live connection, for Close

	// wake is closed (and cleared) when the next batch is dealt with, waking every
	// WaitFor blocked on it; the first WaitFor that has to wait makes it (guarded by mu).
	// One token in a buffered channel woke one waiter of several, and the others slept
	// through the batch they waited for.
	wake     chan struct{}
	waitHook func(seq uint64) // tests: called by WaitFor before it blocks
	done     chan struct{}
	ctx      context.Context
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
	// Implausible counts batches whose sequence number jumped further ahead than
	// SubscribeMaxJump: not applied, nor taken as a gap.
	Implausible uint64
	// Malformed counts messages with another framing and batches that failed to decode
	// (skipped).
	Malformed uint64
	// ApplyErrors counts batches the index refused.
	ApplyErrors uint64
	// ReplayRequests and ReplayErrors count replay round trips and failed ones.
	ReplayRequests, ReplayErrors uint64
	// Connects counts connections established to the PUB socket; ConnectErrors failed
	// dials and handshakes.
	Connects, ConnectErrors uint64
	// Restarts counts publisher restarts seen (a connection whose first batch is numbered
	// below the next one expected): each cleared the server's blocks from the index.
	Restarts uint64
	// Next is the next sequence number the subscriber expects.
	Next uint64
}

// NewSubscriber starts applying the events of the server's PUB socket at endpoint
// ("tcp://host:port") to index under the name server. It connects in the background, as a
// ZeroMQ SUB socket does, and keeps reconnecting until Close; only a malformed endpoint is
// an error.
func NewSubscriber(index kvevents.Applier, server, endpoint string, opts ...SubscriberOption) (*Subscriber, error) {
	cfg := defaultSubscriberConfig()
	for _, o := range opts {
		o(&cfg)
	}
	addr, err := zmtp.TCPAddress(endpoint)
	if err != nil {
		return nil, fmt.Errorf("kvevents/zmq: subscriber: %w", err)
	}
	if cfg.hashSize == 0 {
		if h, ok := index.(interface{ HashSize() int }); ok {
			cfg.hashSize = h.HashSize()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Subscriber{
		index:  index,
		server: server,
		cfg:    cfg,
		addr:   addr,
		topic:  []byte(cfg.topic),
		next:   cfg.from,
		dec:    kvevents.Decoder{HashSize: cfg.hashSize, MaxPayload: cfg.maxMessage},
		done:   make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,
	}
	if cfg.replay != "" {
		raddr, err := zmtp.TCPAddress(cfg.replay)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("kvevents/zmq: subscriber: %w", err)
		}
		s.replay = &replayClient{addr: raddr, timeout: cfg.replayTimeout, handshake: cfg.handshake, lim: limits(cfg.maxMessage)}
	}
	if a, ok := index.(interface{ AddServer(string) }); ok {
		a.AddServer(server) // listed from the start, with no blocks
	}
	go s.run()
	return s, nil
}

func (s *Subscriber) run() {
	defer close(s.done)
	msgs := make(chan liveMessage, 256)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		s.read(msgs)
	}()
	defer func() { <-readerDone }()
	s.catchUp() // whatever was published before we connected
	var tick <-chan time.Time
	if s.cfg.resync > 0 {
		t := time.NewTicker(s.cfg.resync)
		defer t.Stop()
		tick = t.C
	}
	idle := false
	var conn uint64 // the connection of the last message
	first := false  // no batch of conn received yet
	for {
		select {
		case <-s.ctx.Done():
			return
		case lm := <-msgs:
			idle = false
			if lm.conn != conn {
				conn, first = lm.conn, true
			}
			// [topic, seq (8 bytes big-endian), payload]
			m := lm.frames
			if len(m) != 3 || len(m[1]) != 8 || !bytes.HasPrefix(m[0], s.topic) {
				s.mu.Lock()
				s.stats.Malformed++
				s.mu.Unlock()
				continue
			}
			seq := binary.BigEndian.Uint64(m[1])
			s.receive(seq, m[2], first && (lm.exhausted || seq < lm.floor))
			first = false
		case <-tick:
			if idle {
				s.catchUp()
			}
			idle = true
		}
	}
}

// liveMessage is a message of the PUB socket, the number of the connection it came on,
// and the next sequence number expected (and exhausted) when that connection was dialled:
// every batch a publisher sends on it is numbered at least floor, unless it restarted.
// (Read before the subscription is sent, floor cannot count batches published after it:
// a replay running meanwhile may deliver those first.)
type liveMessage struct {
	frames    [][]byte
	conn      uint64
	floor     uint64
	exhausted bool
}

// read connects, subscribes and hands messages to msgs until the subscriber closes,
// reconnecting after every failure.
func (s *Subscriber) read(msgs chan<- liveMessage) {
	pause := s.cfg.retry
	for conn := uint64(1); s.ctx.Err() == nil; conn++ {
		if s.readConn(msgs, conn) {
			pause = s.cfg.retry // it worked for a while: reconnect promptly
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 32*s.cfg.retry)
	}
}

// readConn runs connection number conn; it reports whether the handshake succeeded.
func (s *Subscriber) readConn(msgs chan<- liveMessage, conn uint64) bool {
	s.mu.Lock()
	floor, exhausted := s.next, s.exhausted
	s.mu.Unlock()
	d := net.Dialer{Timeout: s.cfg.handshake}
	nc, err := d.DialContext(s.ctx, "tcp", s.addr)
	if err != nil {
		s.count(func(st *SubscriberStats) { st.ConnectErrors++ })
		return false
	}
	if !s.setConn(nc) {
		nc.Close()
		return false
	}
	defer s.setConn(nil)
	defer nc.Close()
	c, err := zmtp.Handshake(nc, "SUB", limits(s.cfg.maxMessage), time.Now().Add(s.cfg.handshake))
	if err != nil {
		s.count(func(st *SubscriberStats) { st.ConnectErrors++ })
		return false
	}
	_ = nc.SetWriteDeadline(time.Now().Add(s.cfg.handshake))
	if err := c.WriteMessage(append([]byte{1}, s.topic...)); err != nil { // ZMTP 3.0 subscription
		s.count(func(st *SubscriberStats) { st.ConnectErrors++ })
		return false
	}
	_ = nc.SetWriteDeadline(time.Time{})
	c.MessageTimeout = s.cfg.handshake // a server may idle, not stall inside a message
	s.count(func(st *SubscriberStats) { st.Connects++ })
	for {
		m, err := c.Read()
		if err != nil {
			return true
		}
		if m.Command != "" {
			continue
		}
		select {
		case msgs <- liveMessage{m.Frames, conn, floor, exhausted}:
		case <-s.ctx.Done():
			return true
		}
	}
}

// setConn records the live connection so that Close can end it; it refuses one after
// Close.
func (s *Subscriber) setConn(nc net.Conn) bool {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if nc != nil && s.ctx.Err() != nil {
		return false
	}
	s.conn = nc
	return true
}

func (s *Subscriber) count(f func(*SubscriberStats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// receive handles one live batch: a duplicate is skipped, a gap is filled by replay first.
// restart says it is the first batch of a restarted publisher (see Subscriber).
func (s *Subscriber) receive(seq uint64, payload []byte, restart bool) {
	s.mu.Lock()
	if restart {
		s.restarted()
	}
	gap := !s.exhausted && seq > s.next && seq-s.next <= s.cfg.maxJump
	s.mu.Unlock()
	if gap {
		s.catchUp()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliver(seq, payload, false)
}

// deliver applies batch seq if it is the next one or a plausible later one (counting what
// was skipped as lost). Called with s.mu held. Sequence arithmetic never wraps: after
// batch 2^64-1 every batch is a duplicate.
func (s *Subscriber) deliver(seq uint64, payload []byte, replayed bool) {
	if s.exhausted || seq < s.next {
		s.stats.Duplicates++
		return
	}
	if seq-s.next > s.cfg.maxJump {
		s.stats.Implausible++
		return
	}
	s.stats.Lost += seq - s.next
	if seq == math.MaxUint64 {
		s.exhausted = true
	} else {
		s.next = seq + 1
	}
	defer func() { // wake every WaitFor, whatever became of the batch
		if s.wake != nil {
			close(s.wake)
			s.wake = nil
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

// restarted clears what the index holds of the server, which restarted with an empty
// cache, and expects its new stream from 0. Called with s.mu held.
func (s *Subscriber) restarted() {
	s.stats.Restarts++
	s.next, s.exhausted = 0, false
	if s.replay != nil {
		s.replay.reset() // its connection went with the old publisher: the replay below dials anew
	}
	if err := s.index.Apply(s.server, &kvevents.Batch{Events: []kvevents.Event{{Kind: kvevents.KindAllBlocksCleared}}}); err != nil {
		s.stats.ApplyErrors++
	}
}

// catchUp asks the replay socket for everything from the next expected batch on.
func (s *Subscriber) catchUp() {
	if s.replay == nil {
		return
	}
	s.mu.Lock()
	if s.exhausted {
		s.mu.Unlock()
		return
	}
	from := s.next
	s.stats.ReplayRequests++
	s.mu.Unlock()
	err := s.replay.replay(from, func(seq uint64, payload []byte) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.deliver(seq, payload, true)
	})
	if err != nil {
		s.count(func(st *SubscriberStats) { st.ReplayErrors++ })
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
// lost) or ctx is done. Any number of goroutines may wait at once, for the same batch or
// different ones.
func (s *Subscriber) WaitFor(ctx context.Context, seq uint64) error {
	for {
		s.mu.Lock()
		next, exhausted := s.next, s.exhausted
		if next > seq || exhausted {
			s.mu.Unlock()
			return nil
		}
		if s.wake == nil {
			s.wake = make(chan struct{})
		}
		wake := s.wake
		s.mu.Unlock()
		if s.waitHook != nil {
			s.waitHook(seq)
		}
		select {
		case <-wake:
		case <-s.done:
			return errors.New("kvevents/zmq: subscriber closed")
		case <-ctx.Done():
			return fmt.Errorf("%w waiting for batch %d (next is %d)", ErrTimeout, seq, next)
		}
	}
}

// Close stops the subscriber and closes its connections. It returns once its goroutines
// have, in bounded time whatever the server does.
func (s *Subscriber) Close() error {
	s.cancel()
	s.connMu.Lock()
	if s.conn != nil {
		s.conn.Close()
	}
	s.connMu.Unlock()
	if s.replay != nil {
		s.replay.close()
	}
	<-s.done
	return nil
}
