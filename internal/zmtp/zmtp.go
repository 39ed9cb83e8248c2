package zmtp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// Flag bits of a frame's first byte.
const (
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
)

// Limits bound what a Conn accepts from its peer.
type Limits struct {
	// MaxFrame is the longest frame body accepted, command or message.
	MaxFrame int64
	// MaxMessage is the most bytes the frames of one message may hold together.
	MaxMessage int64
	// MaxFrames is the most frames one message may have.
	MaxFrames int
}

// DefaultLimits suit KV events: vLLM's three frames, the payload up to 16 MiB.
var DefaultLimits = Limits{MaxFrame: 16<<20 + 4096, MaxMessage: 16<<20 + 8192, MaxFrames: 8}

// Errors a Conn returns. ErrProtocol is wrapped by every error about what the peer sent.
var (
	ErrProtocol = errors.New("zmtp: protocol error")
	ErrTooLarge = fmt.Errorf("%w: frame or message over the limit", ErrProtocol)
)

// greeting is this side's 64-byte greeting: signature, version 3.0, mechanism NULL, not a
// server. Version 3.0 makes a 3.1 peer send subscriptions as messages, which every peer
// understands; SUBSCRIBE and CANCEL commands from a 3.1 peer are read all the same.
var greeting = func() (g [64]byte) {
	g[0], g[9] = 0xff, 0x7f
	g[10], g[11] = 3, 0
	copy(g[12:], "NULL")
	return g
}()

// maxCommandFrame bounds a handshake command (READY or ERROR): its properties are a
// socket type and an identity of at most 255 bytes.
const maxCommandFrame = 4096

// Conn is one ZMTP connection after its handshake.
type Conn struct {
	nc  net.Conn
	r   *bufio.Reader
	lim Limits

	wmu sync.Mutex
	w   *bufio.Writer

	// PeerType is the socket type the peer announced ("SUB", "DEALER", ...).
	PeerType string
	// PeerIdentity is the identity the peer announced, if any.
	PeerIdentity []byte
	// MessageTimeout, when positive, bounds how long Read waits for the rest of a message
	// once its first byte has arrived: a peer may idle between messages, not stall inside
	// one. Read then owns the connection's read deadline.
	MessageTimeout time.Duration

	frames [][]byte // Read's scratch
}

// compatible lists, per socket type, the peer types it may talk to (RFC 28, 29, 30, 47).
var compatible = map[string][]string{
	"PUB":    {"SUB", "XSUB"},
	"XPUB":   {"SUB", "XSUB"},
	"SUB":    {"PUB", "XPUB"},
	"XSUB":   {"PUB", "XPUB"},
	"ROUTER": {"DEALER", "REQ", "ROUTER"},
	"DEALER": {"ROUTER", "REP", "DEALER"},
	"REQ":    {"ROUTER", "REP"},
	"REP":    {"DEALER", "REQ"},
}

// Handshake greets the peer on nc and exchanges READY commands as socket type self,
// refusing a peer whose type cannot talk to self. It must finish by deadline (a zero
// deadline means none); on success nc's deadlines are cleared. On error nc is left open
// for the caller to close.
func Handshake(nc net.Conn, self string, lim Limits, deadline time.Time) (*Conn, error) {
	if _, ok := compatible[self]; !ok {
		return nil, fmt.Errorf("zmtp: unknown socket type %q", self)
	}
	if err := nc.SetDeadline(deadline); err != nil {
		return nil, err
	}
	c := &Conn{nc: nc, r: bufio.NewReaderSize(nc, 16<<10), w: bufio.NewWriterSize(nc, 16<<10), lim: lim}
	if _, err := c.w.Write(greeting[:]); err != nil {
		return nil, err
	}
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	var peer [64]byte
	if _, err := io.ReadFull(c.r, peer[:]); err != nil {
		return nil, fmt.Errorf("zmtp: greeting: %w", err)
	}
	if err := checkGreeting(&peer); err != nil {
		return nil, err
	}
	if err := c.writeCommand("READY", readyProperties(self)); err != nil {
		return nil, err
	}
	name, body, err := c.readCommand(maxCommandFrame)
	if err != nil {
		return nil, err
	}
	switch name {
	case "READY":
	case "ERROR":
		return nil, fmt.Errorf("%w: peer refused the handshake: %q", ErrProtocol, errorReason(body))
	default:
		return nil, fmt.Errorf("%w: %q command before READY", ErrProtocol, name)
	}
	props, err := parseProperties(body)
	if err != nil {
		return nil, err
	}
	c.PeerType = strings.ToUpper(string(props["socket-type"]))
	c.PeerIdentity = props["identity"]
	ok := false
	for _, t := range compatible[self] {
		ok = ok || t == c.PeerType
	}
	if !ok {
		_ = c.writeCommand("ERROR", errorBody("invalid socket type"))
		return nil, fmt.Errorf("%w: a %s socket cannot talk to %q", ErrProtocol, self, c.PeerType)
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return c, nil
}

func checkGreeting(g *[64]byte) error {
	if g[0] != 0xff || g[9]&1 == 0 {
		return fmt.Errorf("%w: not a ZMTP 3 greeting", ErrProtocol)
	}
	if g[10] < 3 {
		return fmt.Errorf("%w: ZMTP version %d.%d", ErrProtocol, g[10], g[11])
	}
	mech := strings.TrimRight(string(g[12:32]), "\x00")
	if mech != "NULL" {
		return fmt.Errorf("%w: security mechanism %q (only NULL is supported)", ErrProtocol, mech)
	}
	return nil
}

func readyProperties(self string) []byte {
	b := []byte{byte(len("Socket-Type"))}
	b = append(b, "Socket-Type"...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(self)))
	return append(b, self...)
}

// parseProperties reads a READY command's metadata: name (1-byte length), value (4-byte
// length) pairs. Names are case-insensitive.
func parseProperties(b []byte) (map[string][]byte, error) {
	props := map[string][]byte{}
	for len(b) > 0 {
		n := int(b[0])
		if n == 0 || 1+n+4 > len(b) {
			return nil, fmt.Errorf("%w: malformed READY metadata", ErrProtocol)
		}
		name := strings.ToLower(string(b[1 : 1+n]))
		b = b[1+n:]
		v := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(v) > uint64(len(b)) {
			return nil, fmt.Errorf("%w: READY property of %d bytes in %d", ErrProtocol, v, len(b))
		}
		props[name] = b[:v:v]
		b = b[v:]
	}
	return props, nil
}

func errorBody(reason string) []byte { return append([]byte{byte(len(reason))}, reason...) }

func errorReason(body []byte) string {
	if len(body) == 0 || int(body[0]) > len(body)-1 {
		return ""
	}
	return string(body[1 : 1+int(body[0])])
}

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// NetConn returns the underlying connection, for deadlines and addresses.
func (c *Conn) NetConn() net.Conn { return c.nc }

// readFrame reads one frame whose body may be at most max bytes. The body is valid until
// the next read.
func (c *Conn) readFrame(max int64, into []byte) (flags byte, body []byte, err error) {
	flags, err = c.r.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	if flags&^(flagMore|flagLong|flagCommand) != 0 {
		return 0, nil, fmt.Errorf("%w: frame flags 0x%02x", ErrProtocol, flags)
	}
	if flags&flagCommand != 0 && flags&flagMore != 0 {
		return 0, nil, fmt.Errorf("%w: a command with more frames", ErrProtocol)
	}
	var size uint64
	if flags&flagLong != 0 {
		var b [8]byte
		if _, err := io.ReadFull(c.r, b[:]); err != nil {
			return 0, nil, unexpected(err)
		}
		size = binary.BigEndian.Uint64(b[:])
	} else {
		b, err := c.r.ReadByte()
		if err != nil {
			return 0, nil, unexpected(err)
		}
		size = uint64(b)
	}
	if size > uint64(max) {
		return 0, nil, fmt.Errorf("%w: frame of %d bytes, limit %d", ErrTooLarge, size, max)
	}
	body, err = readBody(c.r, into[:0], int(size))
	return flags, body, err
}

// readChunk is how much of a body is allocated ahead of the bytes that fill it.
const readChunk = 64 << 10

// readBody appends n bytes from r to dst, growing dst as the bytes arrive: a peer that
// declares a large frame and sends nothing costs at most readChunk.
func readBody(r io.Reader, dst []byte, n int) ([]byte, error) {
	for n > 0 {
		k := min(n, readChunk)
		if cap(dst)-len(dst) < k {
			grown := make([]byte, len(dst), max(2*cap(dst), len(dst)+k))
			copy(grown, dst)
			dst = grown
		}
		got, err := io.ReadFull(r, dst[len(dst):len(dst)+k])
		dst = dst[:len(dst)+got]
		if err != nil {
			return dst, unexpected(err)
		}
		n -= k
	}
	return dst, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readCommand reads one frame that must be a command, and splits it into name and data.
func (c *Conn) readCommand(max int64) (string, []byte, error) {
	flags, body, err := c.readFrame(max, nil)
	if err != nil {
		return "", nil, err
	}
	if flags&flagCommand == 0 {
		return "", nil, fmt.Errorf("%w: a message where a command was due", ErrProtocol)
	}
	return splitCommand(body)
}

func splitCommand(body []byte) (string, []byte, error) {
	if len(body) == 0 || int(body[0]) > len(body)-1 || body[0] == 0 {
		return "", nil, fmt.Errorf("%w: malformed command", ErrProtocol)
	}
	n := int(body[0])
	return string(body[1 : 1+n]), body[1+n:], nil
}

// Message is what Read returns: a message's frames, or a command.
type Message struct {
	// Frames are the message's frames, or the command's data as one frame: fresh memory
	// for each message, which the caller may keep.
	Frames [][]byte
	// Command is the command's name (SUBSCRIBE, CANCEL, ...), "" for a message.
	Command string
}

// Read reads the next message or command. It answers a PING with a PONG itself and
// skips it. Frames are fresh memory per message, so a caller may keep them.
func (c *Conn) Read() (Message, error) {
	if c.MessageTimeout > 0 {
		if err := c.nc.SetReadDeadline(time.Time{}); err != nil {
			return Message{}, err
		}
		if _, err := c.r.Peek(1); err != nil {
			return Message{}, err
		}
		if err := c.nc.SetReadDeadline(time.Now().Add(c.MessageTimeout)); err != nil {
			return Message{}, err
		}
	}
	for {
		var total int64
		frames := c.frames[:0]
		for {
			left := min(c.lim.MaxFrame, c.lim.MaxMessage-total)
			flags, body, err := c.readFrame(left, nil)
			if err != nil {
				return Message{}, err
			}
			if flags&flagCommand != 0 {
				if len(frames) > 0 {
					return Message{}, fmt.Errorf("%w: a command inside a message", ErrProtocol)
				}
				name, data, err := splitCommand(body)
				if err != nil {
					return Message{}, err
				}
				if name == "PING" {
					if err := c.pong(data); err != nil {
						return Message{}, err
					}
					break
				}
				return Message{Frames: [][]byte{data}, Command: name}, nil
			}
			total += int64(len(body))
			if len(frames) == c.lim.MaxFrames {
				return Message{}, fmt.Errorf("%w: more than %d frames", ErrTooLarge, c.lim.MaxFrames)
			}
			frames = append(frames, body)
			if flags&flagMore == 0 {
				c.frames = frames[:0]
				out := make([][]byte, len(frames))
				copy(out, frames)
				clear(frames)
				return Message{Frames: out}, nil
			}
		}
	}
}

// pong answers a PING: its data is a 2-byte TTL and up to 16 bytes of context, which the
// PONG echoes.
func (c *Conn) pong(ping []byte) error {
	if len(ping) < 2 {
		return fmt.Errorf("%w: short PING", ErrProtocol)
	}
	ctx := ping[2:]
	if len(ctx) > 16 {
		ctx = ctx[:16]
	}
	return c.writeCommand("PONG", ctx)
}

// WriteMessage writes one message of the given frames and flushes it.
func (c *Conn) WriteMessage(frames ...[]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for i, f := range frames {
		var flags byte
		if i < len(frames)-1 {
			flags = flagMore
		}
		if err := c.writeFrame(flags, f); err != nil {
			return err
		}
	}
	return c.w.Flush()
}

func (c *Conn) writeCommand(name string, data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	body := make([]byte, 0, 1+len(name)+len(data))
	body = append(append(append(body, byte(len(name))), name...), data...)
	if err := c.writeFrame(flagCommand, body); err != nil {
		return err
	}
	return c.w.Flush()
}

func (c *Conn) writeFrame(flags byte, body []byte) error {
	var hdr [9]byte
	n := 2
	if len(body) > 255 {
		hdr[0] = flags | flagLong
		binary.BigEndian.PutUint64(hdr[1:], uint64(len(body)))
		n = 9
	} else {
		hdr[0], hdr[1] = flags, byte(len(body))
	}
	if _, err := c.w.Write(hdr[:n]); err != nil {
		return err
	}
	_, err := c.w.Write(body)
	return err
}
