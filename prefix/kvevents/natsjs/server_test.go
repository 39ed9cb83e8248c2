package natsjs_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/internal/testserver"
	"github.com/kvpage/kvpage/prefix/kvevents/natsjs"
)

// shared connects to the NATS server .ci/run started (KVPAGE_NATS_URL).
func shared(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	url := os.Getenv("KVPAGE_NATS_URL")
	if url == "" {
		testserver.Need(t, "NATS", "KVPAGE_NATS_URL")
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
	*testserver.Process
	url string
}

func startOwnNATS(t *testing.T) *ownNATS {
	t.Helper()
	bin := testserver.Binary(t, "KVPAGE_NATS_SERVER", "nats-server")
	port := testserver.FreePort(t)
	url := "nats://127.0.0.1:" + port
	ready := func() bool { // JetStream answers, not just the port
		nc, err := nats.Connect(url, nats.Timeout(200*time.Millisecond))
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		_, err = js.AccountInfo(t.Context())
		return err == nil
	}
	p := testserver.Start(t, ready, bin, "-a", "127.0.0.1", "-p", port, "-js", "-sd", t.TempDir())
	return &ownNATS{Process: p, url: url}
}
