package zmtp

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeConn is a net.Conn whose peer is a byte string: reads come from it, writes are
// kept, deadlines are ignored. The fuzz target runs on it, deterministic and without
// sockets or timers.
type fakeConn struct {
	in  *bytes.Reader
	out bytes.Buffer
}

func (f *fakeConn) Read(b []byte) (int, error)       { return f.in.Read(b) }
func (f *fakeConn) Write(b []byte) (int, error)      { return f.out.Write(b) }
func (f *fakeConn) Close() error                     { return nil }
func (f *fakeConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (f *fakeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (f *fakeConn) SetDeadline(time.Time) error      { return nil }
func (f *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (f *fakeConn) SetWriteDeadline(time.Time) error { return nil }
func newFake(peer []byte) *fakeConn                  { return &fakeConn{in: bytes.NewReader(peer)} }
func command(name string, data []byte) []byte {
	return frame(flagCommand, append(append([]byte{byte(len(name))}, name...), data...))
}
func ready(socketType string) []byte     { return command("READY", readyProperties(socketType)) }
func peerHello(socketType string) []byte { return append(greeting[:], ready(socketType)...) }
func frame(flags byte, body []byte) []byte {
	if len(body) > 255 {
		return append(binary.BigEndian.AppendUint64([]byte{flags | flagLong}, uint64(len(body))), body...)
	}
	return append([]byte{flags, byte(len(body))}, body...)
}

// A 3-frame message with a subscription before it, and a PING that gets its PONG.
func TestHandshakeAndMessages(t *testing.T) {
	in := peerHello("SUB")
	in = append(in, frame(0, []byte("\x01kv@"))...)
	in = append(in, command("PING", []byte{0, 10, 'c', 't', 'x'})...)
	in = append(in, frame(flagMore, []byte("topic"))...)
	in = append(in, frame(flagMore, make([]byte, 8))...)
	in = append(in, frame(0, bytes.Repeat([]byte{7}, 300))...)
	in = append(in, command("SUBSCRIBE", []byte("x"))...)
	fc := newFake(in)
	c, err := Handshake(fc, "PUB", DefaultLimits, time.Time{})
	require.NoError(t, err)
	require.Equal(t, "SUB", c.PeerType)
	m, err := c.Read()
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("\x01kv@")}, m.Frames)
	m, err = c.Read()
	require.NoError(t, err)
	require.Len(t, m.Frames, 3)
	require.Len(t, m.Frames[2], 300)
	m, err = c.Read()
	require.NoError(t, err)
	require.Equal(t, "SUBSCRIBE", m.Command)
	_, err = c.Read()
	require.ErrorIs(t, err, io.EOF)
	// What we wrote: our greeting, our READY, the PONG.
	out := fc.out.Bytes()
	require.Equal(t, greeting[:], out[:64])
	require.Equal(t, ready("PUB"), out[64:64+len(ready("PUB"))])
	require.Equal(t, command("PONG", []byte("ctx")), out[64+len(ready("PUB")):])
}

// Issue 13 item 1: a 64-byte greeting and a frame header declaring 2^62 bytes made
// go-zeromq allocate the declared length (makeslice: len out of range). It is refused
// before anything is read for it, during the handshake and after it.
func TestHugeDeclaredFrames(t *testing.T) {
	huge := binary.BigEndian.AppendUint64([]byte{0x06}, 1<<62)
	_, err := Handshake(newFake(append(greeting[:], huge...)), "PUB", DefaultLimits, time.Time{})
	require.ErrorIs(t, err, ErrTooLarge)

	for _, flags := range []byte{0x02, 0x03, 0x06} {
		c, err := Handshake(newFake(append(peerHello("SUB"), binary.BigEndian.AppendUint64([]byte{flags}, 1<<62)...)), "PUB", DefaultLimits, time.Time{})
		require.NoError(t, err)
		_, err = c.Read()
		require.ErrorIs(t, err, ErrTooLarge, "flags %x", flags)
	}
	// Within the limit but never sent: what is allocated follows what arrives.
	c, err := Handshake(newFake(append(peerHello("SUB"), binary.BigEndian.AppendUint64([]byte{0x02}, 16<<20)...)), "PUB", DefaultLimits, time.Time{})
	require.NoError(t, err)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = c.Read()
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "16 MiB declared, nothing sent")
}

func TestLimits(t *testing.T) {
	lim := Limits{MaxFrame: 10, MaxMessage: 15, MaxFrames: 2}
	for name, tc := range map[string]struct {
		in  []byte
		err error
	}{
		"frame too long":      {frame(0, make([]byte, 11)), ErrTooLarge},
		"message too long":    {append(frame(flagMore, make([]byte, 10)), frame(0, make([]byte, 6))...), ErrTooLarge},
		"too many frames":     {append(append(frame(flagMore, nil), frame(flagMore, nil)...), frame(0, nil)...), ErrTooLarge},
		"reserved flag bits":  {[]byte{0x08, 0}, ErrProtocol},
		"command with more":   {[]byte{0x05, 0}, ErrProtocol},
		"command in message":  {append(frame(flagMore, nil), command("PING", []byte{0, 0})...), ErrProtocol},
		"empty command":       {frame(flagCommand, nil), ErrProtocol},
		"short ping":          {command("PING", nil), ErrProtocol},
		"truncated long size": {[]byte{0x02, 0, 0}, io.ErrUnexpectedEOF},
	} {
		c, err := Handshake(newFake(append(peerHello("SUB"), tc.in...)), "PUB", lim, time.Time{})
		require.NoError(t, err, name)
		_, err = c.Read()
		require.ErrorIs(t, err, tc.err, name)
	}
}

func TestHandshakeRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		self string
		in   []byte
	}{
		"not zmtp":        {"PUB", bytes.Repeat([]byte{'G'}, 64)},
		"zmtp 2":          {"PUB", func() []byte { g := greeting; g[10] = 2; return g[:] }()},
		"curve":           {"PUB", func() []byte { g := greeting; copy(g[12:], "CURVE"); return g[:] }()},
		"wrong peer type": {"PUB", peerHello("PUB")},
		"message first":   {"PUB", append(greeting[:], frame(0, []byte("x"))...)},
		"other command":   {"PUB", append(greeting[:], command("PING", []byte{0, 0})...)},
		"peer error":      {"PUB", append(greeting[:], command("ERROR", errorBody("no"))...)},
		"bad metadata":    {"PUB", append(greeting[:], command("READY", []byte{11, 'S'})...)},
		"property length": {"PUB", append(greeting[:], command("READY", []byte{1, 'a', 0xff, 0xff, 0xff, 0xff})...)},
		"short greeting":  {"PUB", greeting[:30]},
		"unknown self":    {"PAIR", peerHello("PAIR")},
	} {
		_, err := Handshake(newFake(tc.in), tc.self, DefaultLimits, time.Time{})
		require.Error(t, err, name)
	}
	for _, pair := range [][2]string{{"ROUTER", "REQ"}, {"ROUTER", "DEALER"}, {"DEALER", "ROUTER"}, {"SUB", "PUB"}, {"SUB", "XPUB"}} {
		_, err := Handshake(newFake(peerHello(pair[1])), pair[0], DefaultLimits, time.Time{})
		require.NoError(t, err, pair)
	}
}

func TestTCPAddress(t *testing.T) {
	for in, want := range map[string]string{"tcp://*:5557": ":5557", "tcp://127.0.0.1:0": "127.0.0.1:0", "tcp://[::1]:9": "[::1]:9"} {
		got, err := TCPAddress(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, bad := range []string{"ipc:///tmp/x", "tcp://nohost", "5557"} {
		_, err := TCPAddress(bad)
		require.Error(t, err, bad)
	}
}

// FuzzConn is the byte-level fuzz of the handshake and the frame reader: whatever the
// peer sends, Handshake and Read return (no panic, no hang: the input ends), refuse what
// breaks the limits, and never hand back more than they allow.
func FuzzConn(f *testing.F) {
	f.Add(peerHello("SUB"))
	f.Add(append(peerHello("SUB"), frame(0, []byte("\x01"))...))
	f.Add(append(append(peerHello("SUB"), frame(flagMore, []byte("t"))...), frame(0, []byte("p"))...))
	f.Add(append(peerHello("DEALER"), command("PING", []byte{0, 1, 2})...))
	f.Add(append(greeting[:], binary.BigEndian.AppendUint64([]byte{0x06}, 1<<62)...))
	f.Add(append(peerHello("SUB"), binary.BigEndian.AppendUint64([]byte{0x02}, 1<<62)...))
	lim := Limits{MaxFrame: 1 << 10, MaxMessage: 2 << 10, MaxFrames: 4}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, self := range []string{"PUB", "ROUTER", "SUB"} {
			c, err := Handshake(newFake(in), self, lim, time.Time{})
			if err != nil {
				continue
			}
			for range 64 {
				m, err := c.Read()
				if err != nil {
					break
				}
				var total int
				for _, fr := range m.Frames {
					if int64(len(fr)) > lim.MaxFrame {
						t.Fatalf("frame of %d bytes", len(fr))
					}
					total += len(fr)
				}
				if m.Command == "" && (len(m.Frames) > lim.MaxFrames || int64(total) > lim.MaxMessage) {
					t.Fatalf("message of %d frames, %d bytes", len(m.Frames), total)
				}
			}
		}
	})
}
