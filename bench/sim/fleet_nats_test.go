package sim

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents/natsjs"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// TestFleetOverJetStream is the fleet simulator's smoke test over a real transport: the
// servers' batches go through a NATS JetStream stream and a natsjs.Subscriber into the
// router's index, instead of the simulator's delayed queue. Routing then lags by however
// long the transport takes, so only what does not depend on timing is checked: every
// request completes, and once the stream is drained the router's index holds exactly what
// each server has cached.
func TestFleetOverJetStream(t *testing.T) {
	url := os.Getenv("KVPAGE_NATS_URL")
	if url == "" {
		msg := "NATS not available: set KVPAGE_NATS_URL (bash .ci/run starts one and sets it)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	sc := natsjs.StreamConfig{Name: "T_SIM_FLEET", Subject: "t.simfleet", MaxAge: time.Hour, MaxBytes: 256 << 20}
	_ = js.DeleteStream(t.Context(), sc.Name)
	_, err = natsjs.EnsureStream(t.Context(), js, sc)
	require.NoError(t, err)

	index, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR(FleetSeed), 16)
	require.NoError(t, err)
	sub, err := natsjs.NewSubscriber(t.Context(), js, index, natsjs.SubscriberConfig{Replica: "sim", Stream: sc, FromStart: true})
	require.NoError(t, err)
	defer sub.Close()

	seqs := map[string]uint64{}
	publish := func(server string, payload []byte) error {
		m := nats.NewMsg(sc.Subject + "." + server)
		m.Data = payload
		m.Header.Set(natsjs.HeaderSeq, strconv.FormatUint(seqs[server], 10))
		m.Header.Set(natsjs.HeaderEpoch, "1")
		seqs[server]++
		_, err := js.PublishMsg(t.Context(), m)
		return err
	}
	reqs, maxLen := fleetTrace(t, "sysprompt", 200, 24)
	fc := fleetConfig(3, PrefixLoad, 8192, maxLen)
	fc.Publish, fc.Index = publish, index
	f, err := newFleet(reqs, fc, fc.Server, cluster.PrefixLoad{Weight: 0.5})
	require.NoError(t, err)
	require.NoError(t, f.run())
	res := f.result()
	require.Equal(t, len(reqs), res.Completed)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for server, n := range seqs {
		require.NoError(t, sub.WaitFor(ctx, server, 1, n-1), "%s: %+v", server, sub.Stats())
	}
	for _, s := range f.servers {
		p := s.sc.a.(*paged)
		require.Equal(t, p.pool.Available()-p.pool.NumFree(), index.Stats(s.name).Blocks, s.name)
	}
	require.Zero(t, sub.Stats().Lost)
	t.Logf("hit rate %.3f, routed %.3f over JetStream", res.HitRate, res.RoutedHitRate)
}
