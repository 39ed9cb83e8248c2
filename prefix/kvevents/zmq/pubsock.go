package zmq

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvpage/kvpage/internal/zmtp"
)

// pubSocket is a PUB socket: every subscriber has its own bounded queue and writer
// goroutine, so that send never waits for any of them. A batch that finds a subscriber's
// queue full is dropped for that subscriber alone and counted; a subscriber whose write
// takes longer than the write timeout is disconnected.
type pubSocket struct {
	l            *listener
	queueLen     int
	writeTimeout time.Duration

	mu    sync.Mutex
	peers map[*pubPeer]struct{}

	drops, disconnects counter
}

// Subscriptions a SUB peer may hold, and their length.
const (
	maxSubscriptions = 256
	maxTopic         = 1024
)

type pubPeer struct {
	c     *zmtp.Conn
	addr  string
	queue chan [][]byte
	subs  [][]byte // guarded by pubSocket.mu
	gone  bool     // queue closed; guarded by pubSocket.mu

	sent, dropped atomic.Uint64
	pending       atomic.Int64 // queued or being written
}

func newPubSocket(endpoint string, cfg *config) (*pubSocket, error) {
	s := &pubSocket{queueLen: cfg.subscriberQueue, writeTimeout: cfg.writeTimeout, peers: map[*pubPeer]struct{}{}}
	// A SUB peer sends only subscriptions: one short frame each.
	lim := zmtp.Limits{MaxFrame: maxTopic + 1, MaxMessage: maxTopic + 1, MaxFrames: 1}
	l, err := listen(endpoint, "PUB", lim, cfg.handshake, cfg.maxPeers, s.serve)
	if err != nil {
		return nil, err
	}
	s.l = l
	return s, nil
}

// serve runs one subscriber: its writer, and the reading of its subscriptions.
func (s *pubSocket) serve(c *zmtp.Conn) {
	p := &pubPeer{c: c, addr: c.NetConn().RemoteAddr().String(), queue: make(chan [][]byte, s.queueLen)}
	s.mu.Lock()
	s.peers[p] = struct{}{}
	s.mu.Unlock()
	written := make(chan struct{})
	go func() {
		defer close(written)
		s.write(p)
	}()
	s.readSubscriptions(p)
	c.Close() // ends a write in progress
	s.mu.Lock()
	delete(s.peers, p)
	p.gone = true
	close(p.queue)
	s.mu.Unlock()
	<-written
}

func (s *pubSocket) readSubscriptions(p *pubPeer) {
	for {
		m, err := p.c.Read()
		if err != nil {
			return
		}
		var sub, topic bool
		switch {
		case m.Command == "SUBSCRIBE" || m.Command == "CANCEL": // ZMTP 3.1
			sub, topic = m.Command == "SUBSCRIBE", true
		case m.Command == "" && len(m.Frames) == 1 && len(m.Frames[0]) > 0 && m.Frames[0][0] <= 1: // ZMTP 3.0
			sub, topic = m.Frames[0][0] == 1, true
			m.Frames[0] = m.Frames[0][1:]
		}
		if !topic {
			continue // anything else a SUB sends is ignored, as libzmq does
		}
		s.mu.Lock()
		if sub {
			if len(p.subs) == maxSubscriptions {
				s.mu.Unlock()
				return // a peer that subscribes without end is not a subscriber
			}
			p.subs = append(p.subs, m.Frames[0])
		} else {
			for i, t := range p.subs {
				if bytes.Equal(t, m.Frames[0]) {
					p.subs = append(p.subs[:i], p.subs[i+1:]...)
					break
				}
			}
		}
		s.mu.Unlock()
	}
}

// write sends p's queued messages until its queue is closed. After a failed write (the
// peer stopped reading, or went away) it closes the connection and counts the rest of
// the queue as dropped.
func (s *pubSocket) write(p *pubPeer) {
	failed := false
	for m := range p.queue {
		s.writeOne(p, m, &failed)
		p.pending.Add(-1)
	}
}

func (s *pubSocket) writeOne(p *pubPeer, m [][]byte, failed *bool) {
	if *failed {
		p.dropped.Add(1)
		s.drops.add(1)
		return
	}
	_ = p.c.NetConn().SetWriteDeadline(time.Now().Add(s.writeTimeout))
	if err := p.c.WriteMessage(m...); err != nil {
		*failed = true
		p.dropped.Add(1)
		s.drops.add(1)
		s.disconnects.add(1)
		p.c.Close()
		return
	}
	p.sent.Add(1)
}

// send queues a message for every subscriber whose subscriptions match its first frame,
// never waiting: a full queue drops it for that subscriber, counted.
func (s *pubSocket) send(frames [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.peers {
		if p.gone || !matches(p.subs, frames[0]) {
			continue
		}
		p.pending.Add(1)
		select {
		case p.queue <- frames:
		default:
			p.pending.Add(-1)
			p.dropped.Add(1)
			s.drops.add(1)
		}
	}
}

func matches(subs [][]byte, topic []byte) bool {
	for _, t := range subs {
		if bytes.HasPrefix(topic, t) {
			return true
		}
	}
	return false
}

// PeerStats is what a Publisher knows of one subscriber.
type PeerStats struct {
	// Addr is the subscriber's address.
	Addr string
	// Sent counts batches written to it; Dropped those dropped for it (its queue was full,
	// or its connection failed with them queued).
	Sent, Dropped uint64
	// Queued is how many batches wait for it now.
	Queued int
}

func (s *pubSocket) peerStats() []PeerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PeerStats, 0, len(s.peers))
	for p := range s.peers {
		out = append(out, PeerStats{Addr: p.addr, Sent: p.sent.Load(), Dropped: p.dropped.Load(), Queued: len(p.queue)})
	}
	return out
}

// close lets the subscribers' queues drain for at most linger, then closes everything.
func (s *pubSocket) close(linger time.Duration) error {
	deadline := time.Now().Add(linger)
	for time.Now().Before(deadline) && s.queued() > 0 {
		time.Sleep(time.Millisecond)
	}
	return s.l.close()
}

func (s *pubSocket) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for p := range s.peers {
		n += int(p.pending.Load())
	}
	return n
}
