package zmq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"time"

	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/internal/zmtp"
)

// The replay protocol is vLLM's ZmqEventPublisher's. A subscriber that noticed a gap in
// the sequence numbers sends the ROUTER socket one request, the first sequence number it
// wants as 8 bytes big-endian, behind an empty delimiter frame (REQ adds it; a DEALER adds
// it by hand). The ROUTER answers with one message per buffered batch whose sequence
// number is at least that, each [empty, seq (8 bytes big-endian), payload], then the end
// marker [empty, -1 as 8 bytes (all 0xff), empty payload]. Batches that left the buffer
// are simply absent: the subscriber sees the gap in the sequence numbers. The marker's
// number is also that of batch 2^64-1, which a publisher may buffer (vLLM numbers with a
// Python int and writes it unsigned): the marker is the one with an empty payload, as no
// batch's payload is.
//
// A ROUTER prefixes what it receives with the peer's identity and routes replies by it;
// here every connection has its own goroutine, which answers on the connection the
// request came from, so identities are not needed.

// endSeq is the sequence number of the end-of-replay marker: -1 as 8 big-endian bytes.
var endSeq = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// replayEntry is one published batch as the ring keeps it. The payload is never written
// after it enters the ring (the subscribers' queues share it), so readers may hold it.
type replayEntry struct {
	seq     uint64
	payload []byte
}

// replayRing is the bounded buffer of the last published batches, in sequence order. The
// sender goroutine pushes, the replay goroutines read: a mutex guards it.
type replayRing struct {
	mu     sync.Mutex
	buf    []replayEntry
	start  int // index of the oldest entry
	n      int
	pushes uint64
}

func newReplayRing(capacity int) *replayRing {
	return &replayRing{buf: make([]replayEntry, capacity)}
}

func (r *replayRing) push(seq uint64, payload []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = replayEntry{seq, payload}
		r.n++
	} else {
		r.buf[r.start] = replayEntry{seq, payload}
		r.start = (r.start + 1) % len(r.buf)
	}
	r.pushes++
	if invariant.Sample(r.pushes) {
		invariant.Check(r.checkInvariants)
	}
}

// checkInvariants verifies, with r.mu held, that the ring holds at most its capacity and
// its entries in strictly increasing sequence order.
func (r *replayRing) checkInvariants() error {
	if r.n < 0 || r.n > len(r.buf) || r.start < 0 || r.start >= len(r.buf) {
		return fmt.Errorf("kvevents/zmq: replay ring of %d holds %d from %d", len(r.buf), r.n, r.start)
	}
	for i := 1; i < r.n; i++ {
		a, b := r.buf[(r.start+i-1)%len(r.buf)], r.buf[(r.start+i)%len(r.buf)]
		if a.seq >= b.seq {
			return fmt.Errorf("kvevents/zmq: replay ring out of order: %d before %d", a.seq, b.seq)
		}
	}
	return nil
}

// from appends to dst the entries whose sequence number is at least seq, oldest first.
func (r *replayRing) from(dst []replayEntry, seq uint64) []replayEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.n {
		e := r.buf[(r.start+i)%len(r.buf)]
		if e.seq >= seq {
			dst = append(dst, e)
		}
	}
	return dst
}

// replayIdle is how long a replay connection may wait between requests before it is
// closed (the client reconnects for its next request).
const replayIdle = 5 * time.Minute

// replaySocket is the ROUTER socket that serves replays.
type replaySocket struct {
	l            *listener
	ring         *replayRing
	writeTimeout time.Duration
	requests     counter
	errors       counter
}

func newReplaySocket(endpoint string, ring *replayRing, cfg *config) (*replaySocket, error) {
	s := &replaySocket{ring: ring, writeTimeout: cfg.writeTimeout}
	// Requests are [empty, up to 8 bytes]; a ROUTER peer may add an identity or two.
	lim := zmtp.Limits{MaxFrame: 256, MaxMessage: 1024, MaxFrames: 4}
	l, err := listen(endpoint, "ROUTER", lim, cfg.handshake, cfg.maxPeers, s.serve)
	if err != nil {
		return nil, err
	}
	s.l = l
	return s, nil
}

// serve answers one connection's requests until it fails, idles too long or is closed.
func (s *replaySocket) serve(c *zmtp.Conn) {
	var entries []replayEntry
	nc := c.NetConn()
	for {
		_ = nc.SetReadDeadline(time.Now().Add(replayIdle))
		m, err := c.Read()
		if err != nil {
			return
		}
		// [empty delimiter, start sequence]; vLLM ignores any other shape.
		if m.Command != "" || len(m.Frames) != 2 || len(m.Frames[0]) != 0 || len(m.Frames[1]) > 8 {
			continue
		}
		s.requests.add(1)
		var start uint64
		for _, c := range m.Frames[1] {
			start = start<<8 | uint64(c)
		}
		entries = s.ring.from(entries[:0], start)
		ok := true
		for _, e := range entries {
			_ = nc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
			if c.WriteMessage(nil, seqBytes(e.seq), e.payload) != nil {
				ok = false
				break
			}
		}
		clear(entries) // drop the references to payloads the ring may recycle
		if ok {
			_ = nc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
			ok = c.WriteMessage(nil, endSeq, nil) == nil
		}
		if !ok {
			s.errors.add(1)
			return
		}
	}
}

func seqBytes(seq uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, seq)
	return b
}

// errReplayTimeout reports a replay request that got no complete answer in time.
var errReplayTimeout = errors.New("kvevents/zmq: replay timed out")

// replayClient asks a publisher's ROUTER socket for missed batches over a DEALER
// connection, every wait bounded by the timeout. After any failure the connection is
// dropped, so that late answers to an abandoned request cannot be taken for answers to
// the next one; the next request reconnects.
type replayClient struct {
	addr      string
	timeout   time.Duration
	handshake time.Duration
	lim       zmtp.Limits

	mu     sync.Mutex // guards conn and closed against Close
	conn   *zmtp.Conn
	closed bool
}

// connect returns the connection, dialling one if there is none; reused says it was
// already open (and may have died since).
func (c *replayClient) connect() (conn *zmtp.Conn, reused bool, err error) {
	c.mu.Lock()
	conn, closed := c.conn, c.closed
	c.mu.Unlock()
	if closed {
		return nil, false, errors.New("kvevents/zmq: subscriber closed")
	}
	if conn != nil {
		return conn, true, nil
	}
	nc, err := net.DialTimeout("tcp", c.addr, c.timeout)
	if err != nil {
		return nil, false, fmt.Errorf("kvevents/zmq: replay dial: %w", err)
	}
	conn, err = zmtp.Handshake(nc, "DEALER", c.lim, time.Now().Add(c.handshake))
	if err != nil {
		nc.Close()
		return nil, false, fmt.Errorf("kvevents/zmq: replay handshake: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		conn.Close()
		return nil, false, errors.New("kvevents/zmq: subscriber closed")
	}
	c.conn = conn
	return conn, false, nil
}

// reset drops the connection.
func (c *replayClient) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// close drops the connection for good: a replay in progress fails at once.
func (c *replayClient) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.reset()
}

// replay requests every buffered batch from seq on and calls apply for each, in order,
// until the end marker. Each message must come within the timeout, the whole answer
// within 30 times it. A connection kept from an earlier replay may have died meanwhile
// (the publisher's end closed, a network blip the PUB connection also saw): a request
// that fails on one, other than by timing out, is made once more on a new connection,
// from the batch after the last one applied, rather than leave the gap unfilled. Once
// batch 2^64-1 is applied there is no batch after it to ask for: the replay has delivered
// all there can be, and a failure after it is no failure.
func (c *replayClient) replay(seq uint64, apply func(seq uint64, payload []byte)) error {
	from, top := seq, false // top: batch 2^64-1 was applied (from cannot say so)
	reused, err := c.replayOnce(seq, func(s uint64, payload []byte) {
		if s == math.MaxUint64 {
			top = true
		} else {
			from = max(from, s+1)
		}
		apply(s, payload)
	})
	switch {
	case top:
		return nil
	case err != nil && reused && !errors.Is(err, errReplayTimeout):
		_, err = c.replayOnce(from, apply)
	}
	return err
}

func (c *replayClient) replayOnce(seq uint64, apply func(seq uint64, payload []byte)) (reused bool, err error) {
	conn, reused, err := c.connect()
	if err != nil {
		return reused, err
	}
	nc := conn.NetConn()
	_ = nc.SetWriteDeadline(time.Now().Add(c.timeout))
	if err := conn.WriteMessage(nil, seqBytes(seq)); err != nil {
		c.reset()
		return reused, fmt.Errorf("kvevents/zmq: replay request: %w", err)
	}
	end := time.Now().Add(30 * c.timeout)
	for {
		deadline := time.Now().Add(c.timeout)
		if deadline.After(end) {
			deadline = end
		}
		_ = nc.SetReadDeadline(deadline)
		m, err := conn.Read()
		if err != nil {
			c.reset()
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return reused, errReplayTimeout
			}
			return reused, fmt.Errorf("kvevents/zmq: replay: %w", err)
		}
		// [empty delimiter, seq, payload]
		if m.Command != "" || len(m.Frames) != 3 || len(m.Frames[0]) != 0 || len(m.Frames[1]) != 8 {
			continue
		}
		if string(m.Frames[1]) == string(endSeq) && len(m.Frames[2]) == 0 {
			return reused, nil
		}
		apply(binary.BigEndian.Uint64(m.Frames[1]), m.Frames[2])
	}
}
