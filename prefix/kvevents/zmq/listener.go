package zmq

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvpage/kvpage/internal/zmtp"
)

// counter is a statistic written by one goroutine and read by any.
type counter struct{ v atomic.Uint64 }

func (c *counter) add(n uint64) { c.v.Add(n) }
func (c *counter) get() uint64  { return c.v.Load() }

// listener accepts a socket's connections: at most maxPeers at once, each handshaken on
// its own goroutine by a deadline, so that no peer, silent or slow, delays another; then
// serve runs with the connection until it returns. close closes every connection and
// waits for every goroutine.
type listener struct {
	ln        net.Listener
	self      string // our socket type
	lim       zmtp.Limits
	handshake time.Duration
	maxPeers  int
	serve     func(*zmtp.Conn)

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup

	handshakeFailures, refused counter
}

func listen(endpoint, self string, lim zmtp.Limits, handshake time.Duration, maxPeers int, serve func(*zmtp.Conn)) (*listener, error) {
	addr, err := zmtp.TCPAddress(endpoint)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &listener{ln: ln, self: self, lim: lim, handshake: handshake, maxPeers: maxPeers, serve: serve, conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// endpoint returns "tcp://host:port" with the port the system chose.
func (l *listener) endpoint() string { return "tcp://" + l.ln.Addr().String() }

func (l *listener) accept() {
	defer l.wg.Done()
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond) // out of file descriptors, say: let it pass
			continue
		}
		l.mu.Lock()
		if l.closed || len(l.conns) >= l.maxPeers {
			l.mu.Unlock()
			nc.Close()
			l.refused.add(1)
			continue
		}
		l.conns[nc] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go func() {
			defer l.wg.Done()
			defer l.drop(nc)
			c, err := zmtp.Handshake(nc, l.self, l.lim, time.Now().Add(l.handshake))
			if err != nil {
				l.handshakeFailures.add(1)
				return
			}
			l.serve(c)
		}()
	}
}

func (l *listener) drop(nc net.Conn) {
	nc.Close()
	l.mu.Lock()
	delete(l.conns, nc)
	l.mu.Unlock()
}

// close stops accepting, closes every connection (which ends every read and write) and
// waits for the goroutines; it returns in bounded time whatever the peers do.
func (l *listener) close() error {
	err := l.ln.Close()
	l.mu.Lock()
	l.closed = true
	for nc := range l.conns {
		nc.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
	return err
}
