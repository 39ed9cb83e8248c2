package zmq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvpage/kvpage/internal/invariant"
)

// The replay protocol is vLLM's ZmqEventPublisher's. A subscriber that noticed a gap in
// the sequence numbers sends the ROUTER socket one request, the first sequence number it
// wants as 8 bytes big-endian, behind an empty delimiter frame (REQ adds it; a DEALER adds
// it by hand). The ROUTER answers with one message per buffered batch whose sequence
// number is at least that, each [empty, seq (8 bytes big-endian), payload], then the end
// marker [empty, -1 as 8 bytes (all 0xff), empty payload]. Batches that left the buffer
// are simply absent: the subscriber sees the gap in the sequence numbers.

// endSeq is the sequence number of the end-of-replay marker: -1 as 8 big-endian bytes.
var endSeq = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// replayEntry is one published batch as the ring keeps it. The payload is never written
// after it enters the ring (the PUB socket's queue shares it), so readers may hold it.
type replayEntry struct {
	seq     uint64
	payload []byte
}

// replayRing is the bounded buffer of the last published batches, in sequence order. The
// sender goroutine pushes, the replay goroutine reads: a mutex guards it.
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

// serveReplay answers replay requests on the ROUTER socket until it is closed.
func serveReplay(router zmq4.Socket, ring *replayRing, served *counter) {
	var entries []replayEntry
	for {
		msg, err := router.Recv()
		if err != nil {
			return // the socket was closed
		}
		// [identity, empty delimiter, start sequence]; vLLM ignores any other shape.
		if len(msg.Frames) != 3 || len(msg.Frames[2]) > 8 {
			continue
		}
		served.add(1)
		id := msg.Frames[0]
		var start uint64
		for _, c := range msg.Frames[2] {
			start = start<<8 | uint64(c)
		}
		entries = ring.from(entries[:0], start)
		for _, e := range entries {
			if router.SendMulti(zmq4.NewMsgFrom(id, nil, seqBytes(e.seq), e.payload)) != nil {
				break
			}
		}
		_ = router.SendMulti(zmq4.NewMsgFrom(id, nil, endSeq, nil))
		clear(entries) // drop the references to payloads the ring may recycle
	}
}

func seqBytes(seq uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, seq)
	return b
}

// errReplayTimeout reports a replay request that got no complete answer in time.
var errReplayTimeout = errors.New("kvevents/zmq: replay timed out")

// replayClient asks a publisher's ROUTER socket for missed batches over a DEALER socket.
// A reader goroutine feeds the socket's messages to a channel so that a request can give
// up at a deadline; after a timeout the socket is replaced, so that late answers to the
// abandoned request cannot be taken for answers to the next one.
type replayClient struct {
	endpoint string
	timeout  time.Duration
	sock     zmq4.Socket
	msgs     chan zmq4.Msg
}

func (c *replayClient) connect() error {
	if c.sock != nil {
		return nil
	}
	sock := zmq4.NewDealer(context.Background(), zmq4.WithDialerMaxRetries(3), zmq4.WithDialerRetry(50*time.Millisecond))
	if err := sock.Dial(c.endpoint); err != nil {
		sock.Close()
		return fmt.Errorf("kvevents/zmq: replay dial: %w", err)
	}
	msgs := make(chan zmq4.Msg, 64)
	go func() {
		defer close(msgs)
		for {
			m, err := sock.Recv()
			if err != nil {
				return
			}
			msgs <- m
		}
	}()
	c.sock, c.msgs = sock, msgs
	return nil
}

func (c *replayClient) reset() {
	if c.sock != nil {
		c.sock.Close()
		for range c.msgs { // let the reader goroutine finish
		}
		c.sock, c.msgs = nil, nil
	}
}

// replay requests every buffered batch from seq on and calls apply for each, in order,
// until the end marker.
func (c *replayClient) replay(seq uint64, apply func(seq uint64, payload []byte)) error {
	if err := c.connect(); err != nil {
		return err
	}
	if err := c.sock.SendMulti(zmq4.NewMsgFrom(nil, seqBytes(seq))); err != nil {
		c.reset()
		return fmt.Errorf("kvevents/zmq: replay request: %w", err)
	}
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	for {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				c.reset()
				return errors.New("kvevents/zmq: replay socket closed")
			}
			// [empty delimiter, seq, payload]
			if len(m.Frames) != 3 || len(m.Frames[1]) != 8 {
				continue
			}
			if string(m.Frames[1]) == string(endSeq) {
				return nil
			}
			apply(binary.BigEndian.Uint64(m.Frames[1]), m.Frames[2])
		case <-timer.C:
			c.reset()
			return errReplayTimeout
		}
	}
}
