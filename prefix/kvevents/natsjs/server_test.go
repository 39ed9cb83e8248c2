package natsjs_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/kvevents/natsjs"
)

// needServer skips a test whose server a developer did not start, and fails it in CI
// (CI=true), where .ci/run starts one: a skipped integration test must not pass CI.
func needServer(t testing.TB, what, env string) {
	t.Helper()
	msg := fmt.Sprintf("%s not available: set %s (bash .ci/run starts one and sets it)", what, env)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// shared connects to the NATS server .ci/run started (KVPAGE_NATS_URL).
func shared(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	url := os.Getenv("KVPAGE_NATS_URL")
	if url == "" {
		needServer(t, "NATS", "KVPAGE_NATS_URL")
	}
	return connect(t, url)
}

func connect(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// testStream gives each test a new stream and subject of its own on the server js is
// connected to (a stream of an earlier run is deleted).
func testStream(t testing.TB, js jetstream.JetStream) natsjs.StreamConfig {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	err := js.DeleteStream(t.Context(), "T_"+name)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		require.NoError(t, err)
	}
	return natsjs.StreamConfig{Name: "T_" + name, Subject: "t." + strings.ToLower(name), MaxAge: time.Hour, MaxBytes: 64 << 20}
}

// ownNATS is a nats-server this test starts, for faults the shared server must not see.
type ownNATS struct {
	bin, dir, url string
	port          string
	cmd           *exec.Cmd
}

func startOwnNATS(t *testing.T) *ownNATS {
	t.Helper()
	bin := os.Getenv("KVPAGE_NATS_SERVER")
	if bin == "" {
		bin, _ = exec.LookPath("nats-server")
	}
	if bin == "" {
		needServer(t, "nats-server binary", "KVPAGE_NATS_SERVER or PATH")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	require.NoError(t, l.Close())
	n := &ownNATS{bin: bin, dir: t.TempDir(), port: port, url: "nats://127.0.0.1:" + port}
	n.start(t)
	t.Cleanup(n.stop)
	return n
}

func (n *ownNATS) start(t *testing.T) {
	t.Helper()
	n.cmd = exec.Command(n.bin, "-a", "127.0.0.1", "-p", n.port, "-js", "-sd", n.dir)
	require.NoError(t, n.cmd.Start())
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		nc, err := nats.Connect(n.url, nats.Timeout(200*time.Millisecond))
		if err == nil {
			js, _ := jetstream.New(nc)
			_, err = js.AccountInfo(t.Context())
			nc.Close()
			if err == nil {
				return
			}
		}
		time.Sleep(30 * time.Millisecond)
	}
	t.Fatalf("nats-server on %s did not start", n.url)
}

func (n *ownNATS) stop() {
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
		n.cmd = nil
	}
}
