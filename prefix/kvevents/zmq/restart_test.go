package zmq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/kvevents/zmq"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// tokensPrompt is the prompt of tokens from, from+1, ..., n of them.
func tokensPrompt(from, n int32) *prefix.Prompt {
	p := &prefix.Prompt{}
	for v := from; v < from+n; v++ {
		p.Tokens = append(p.Tokens, v)
	}
	return p
}

// storeOn publishes one batch storing p's full blocks, as a server caching it would.
func storeOn(t *testing.T, pub *zmq.Publisher, p *prefix.Prompt) uint64 {
	t.Helper()
	hs := vllmhash.PromptHashes(vllmhash.NewSHA256CBOR(e2eSeed), p, e2eBlockSize)
	e := &prefix.BlockStored{HashSize: 32, BlockSize: e2eBlockSize, Tokens: p.Tokens}
	for i, h := range hs {
		e.Hashes = append(e.Hashes, h...)
		e.Blocks = append(e.Blocks, blocks.ID(i+1))
	}
	pub.BlockStored(e)
	seq, ok := pub.Flush()
	require.True(t, ok)
	return seq
}

// A server restarts: its new publisher, on the same endpoints, numbers batches from 0 again
// (as vLLM's does) and its cache is empty. The subscriber takes the first batch of the new
// connection, numbered below what it expected, for a restart: it clears the server's old
// blocks from the index and applies the new run from its start. (It used to count the new
// run's batches as duplicates of the old ones and drop them, keeping the old blocks.) A
// replacement publisher that continues the numbering (kvevents.WithFirstSeq), for a
// process that kept its cache, is no restart: the blocks stay.
func TestSubscriberTakesARestartedPublisherFromItsStart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		continues bool // the new publisher continues the old numbering
	}{
		{"restarted from 0", false},
		{"replaced, numbering continued", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := tokensPrompt(0, 16)
			fresh := tokensPrompt(1000, 16)
			pub, err := zmq.NewPublisher("tcp://127.0.0.1:0", zmq.WithReplay("tcp://127.0.0.1:0"))
			require.NoError(t, err)
			endpoint, replay := pub.Endpoint(), pub.ReplayEndpoint()
			c := newIndex(t)
			sub, err := zmq.NewSubscriber(c, "s", endpoint, zmq.SubscribeReplay(replay),
				zmq.SubscribeRetry(5*time.Millisecond), zmq.SubscribeResync(20*time.Millisecond))
			require.NoError(t, err)
			defer sub.Close()
			var last uint64
			for range 50 { // more than the new run publishes before the subscriber is back
				last = storeOn(t, pub, old)
			}
			waitFor(t, sub, last)
			require.Equal(t, []cluster.ServerHit{{Server: "s", Blocks: 4}}, match(t, c, old))
			lastSeq, _ := pub.LastSeq()
			connects := sub.Stats().Connects
			require.NoError(t, pub.Close())

			var events []kvevents.Option
			if tc.continues {
				events = append(events, kvevents.WithFirstSeq(lastSeq+1))
			}
			pub2, err := zmq.NewPublisher(endpoint, zmq.WithReplay(replay), zmq.WithEvents(events...))
			require.NoError(t, err)
			defer func() { require.NoError(t, pub2.Close()) }()
			// Publish once the subscriber has reconnected, until it has caught up (a PUB
			// socket sends nothing to a peer before its subscription arrives).
			require.Eventually(t, func() bool { return sub.Stats().Connects > connects }, 10*time.Second, time.Millisecond)
			require.Eventually(t, func() bool {
				storeOn(t, pub2, fresh)
				hits := match(t, c, fresh)
				return len(hits) == 1 && hits[0].Blocks == 4
			}, 10*time.Second, 10*time.Millisecond, "stats %+v", sub.Stats())
			st := sub.Stats()
			require.Equal(t, []cluster.ServerHit{{Server: "s", Blocks: 4}}, match(t, c, fresh))
			if tc.continues {
				require.Zero(t, st.Restarts)
				require.Equal(t, []cluster.ServerHit{{Server: "s", Blocks: 4}}, match(t, c, old), "the replaced publisher's server kept its cache")
				return
			}
			require.EqualValues(t, 1, st.Restarts)
			require.Zero(t, st.Lost, "the new run's first batches came by replay: %+v", st)
			require.Equal(t, []cluster.ServerHit{{Server: "s", Blocks: 0}}, match(t, c, old), "the restarted server's old blocks are gone")
		})
	}
}
