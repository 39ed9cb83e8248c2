package zmq_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/kvevents/zmq"
)

// The interop tests run a real libzmq peer: Debian's python3-zmq (pyzmq over libzmq) and
// python3-msgpack, under /usr/bin/python3. They skip when those are absent.

func libzmqPython(t *testing.T) string {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import zmq, msgpack").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("libzmq interop needs python3-zmq and python3-msgpack (apt-get install -y python3-zmq python3-msgpack): %v", err)
		}
		t.Skipf("no libzmq peer (apt-get install -y python3-zmq python3-msgpack): %v", err)
	}
	return py
}

// runPython starts script with args and returns its stdout lines.
func runPython(t *testing.T, script string, args ...string) (<-chan string, *exec.Cmd) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "peer.py")
	require.NoError(t, os.WriteFile(path, []byte(script), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, libzmqPython(t), append([]string{path}, args...)...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines, cmd
}

func line(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		require.True(t, ok, "the libzmq peer exited")
		return l
	case <-time.After(30 * time.Second):
		t.Fatal("no answer from the libzmq peer")
	}
	return ""
}

// A libzmq SUB and DEALER against our PUB and ROUTER: the subscription (libzmq 4.3
// speaks ZMTP 3.1), vLLM's framing, the replay protocol, and batches Python's msgpack
// decodes as vLLM's structs.
const libzmqConsumer = `
import sys, zmq, msgpack
pub, replay = sys.argv[1], sys.argv[2]
ctx = zmq.Context()
sub = ctx.socket(zmq.SUB); sub.connect(pub); sub.setsockopt_string(zmq.SUBSCRIBE, "kv@")
dealer = ctx.socket(zmq.DEALER); dealer.connect(replay)
print("ready", flush=True)
live = []
while len(live) < 20:
    if not sub.poll(10000): print("timeout"); sys.exit(1)
    topic, seq, payload = sub.recv_multipart()
    assert topic == b"kv@pod@model", topic
    b = msgpack.unpackb(payload, raw=False)
    assert isinstance(b, list) and len(b) == 3 and isinstance(b[0], float), b
    assert b[1][0][0] == "AllBlocksCleared", b
    live.append(int.from_bytes(seq, "big"))
assert live == list(range(live[0], live[0] + 20)), live
dealer.send_multipart([b"", (0).to_bytes(8, "big")])
got = []
while True:
    if not dealer.poll(10000): print("replay timeout"); sys.exit(1)
    empty, seq, payload = dealer.recv_multipart()
    assert empty == b""
    if seq == b"\xff" * 8:
        assert payload == b""
        break
    msgpack.unpackb(payload, raw=False)
    got.append(int.from_bytes(seq, "big"))
assert got[:live[-1] + 1] == list(range(live[-1] + 1)), got
print("ok", live[0], len(got), flush=True)
`

func TestLibzmqSubscribesAndReplays(t *testing.T) {
	p := newPublisher(t, zmq.WithTopic("kv@pod@model"))
	lines, _ := runPython(t, libzmqConsumer, p.Endpoint(), p.ReplayEndpoint())
	require.Equal(t, "ready", line(t, lines))
	done := make(chan string, 1)
	go func() { done <- line(t, lines) }()
	// Publish until the consumer has seen 20 live batches: a PUB drops what it sends
	// before the subscription arrives, as libzmq's does.
	for {
		publishCleared(t, p)
		select {
		case l := <-done:
			require.True(t, strings.HasPrefix(l, "ok "), l)
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// A libzmq PUB and ROUTER (vLLM's ZmqEventPublisher's sockets and replay loop) against
// our Subscriber: it connects, subscribes, decodes vLLM's batches, and fills the gap
// before its subscription from the ROUTER.
const libzmqProducer = `
import sys, zmq, msgpack, time
ctx = zmq.Context()
pub = ctx.socket(zmq.PUB); pport = pub.bind_to_random_port("tcp://127.0.0.1")
router = ctx.socket(zmq.ROUTER); rport = router.bind_to_random_port("tcp://127.0.0.1")
print(pport, rport, flush=True)
buf = []
poller = zmq.Poller(); poller.register(router, zmq.POLLIN)
seq = 0
deadline = time.time() + 30
while time.time() < deadline:
    h = seq.to_bytes(32, "big")
    batch = [time.time(), [["BlockStored", [h], None, list(range(16)), 16, None, "GPU", None, [None]]], 0]
    payload = msgpack.packb(batch, use_bin_type=True)
    pub.send_multipart([b"", seq.to_bytes(8, "big"), payload])
    buf.append((seq, payload)); seq += 1
    for _ in range(5):
        if dict(poller.poll(2)).get(router):
            client, _, start = router.recv_multipart()
            start = int.from_bytes(start, "big")
            for s, p in buf:
                if s >= start:
                    router.send_multipart([client, b"", s.to_bytes(8, "big"), p])
            router.send_multipart([client, b"", (-1).to_bytes(8, "big", signed=True), b""])
`

func TestSubscriberReadsLibzmq(t *testing.T) {
	lines, _ := runPython(t, libzmqProducer)
	var pport, rport int
	_, err := fmt.Sscan(line(t, lines), &pport, &rport)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // let a few batches go by unseen: the replay fetches them
	c := newIndex(t)
	sub, err := zmq.NewSubscriber(c, "vllm", fmt.Sprintf("tcp://127.0.0.1:%d", pport),
		zmq.SubscribeReplay(fmt.Sprintf("tcp://127.0.0.1:%d", rport)))
	require.NoError(t, err)
	defer sub.Close()
	waitFor(t, sub, 40)
	st := sub.Stats()
	require.Zero(t, st.Malformed)
	require.Zero(t, st.Lost, "the replay filled every gap")
	require.Positive(t, st.Replayed)
	require.GreaterOrEqual(t, c.Stats("vllm").Blocks, 41)
}
