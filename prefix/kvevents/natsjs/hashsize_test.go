package natsjs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/kvevents/natsjs"
)

// Servers hashing with prefix.Fast64 send 8-byte hashes. The Subscriber takes the hash
// size from an index that has one, or from SubscriberConfig.HashSize; with the default
// size (32, vLLM's sha256) every such batch is malformed, which is what it did before it
// had the setting.
func TestFast64HashesOverJetStream(t *testing.T) {
	nc, js := shared(t)
	sc := testStream(t, js)
	pub, err := natsjs.NewPublisher(t.Context(), nc, natsjs.PublisherConfig{Server: "fast", Stream: sc, Epoch: 1})
	require.NoError(t, err)
	pool, err := blocks.New(64, blocks.WithNullBlock())
	require.NoError(t, err)
	index, err := prefix.New(pool, blockSize, prefix.WithHasher(prefix.Fast64{}), prefix.WithObserver(pub))
	require.NoError(t, err)
	mgr, err := blocktable.New(blocktable.Config{Pool: pool, Index: index, BlockSize: blockSize})
	require.NoError(t, err)
	s := &server{name: "fast", mgr: mgr, pub: pub}
	toks := seqTokens(0, 4*blockSize)
	seq := s.serve(t, toks)

	fromIndex, err := cluster.NewClusterIndex(prefix.Fast64{}, blockSize)
	require.NoError(t, err)
	byIndex := subscribe(t, js, fromIndex, "by-index", sc, true)
	waitFor(t, byIndex, pub, seq)
	require.Equal(t, []cluster.ServerHit{{Server: "fast", Blocks: 4}}, hitsOf(t, fromIndex, toks))
	require.Zero(t, byIndex.Stats().Malformed)

	// An index that does not know its hash size (Redis, a wrapper) is told.
	inner, err := cluster.NewClusterIndex(prefix.Fast64{}, blockSize)
	require.NoError(t, err)
	told, err := natsjs.NewSubscriber(t.Context(), js, &countingIndex{inner: inner},
		natsjs.SubscriberConfig{Replica: "told", Stream: sc, FromStart: true, HashSize: 8})
	require.NoError(t, err)
	waitFor(t, told, pub, seq)
	require.Equal(t, []cluster.ServerHit{{Server: "fast", Blocks: 4}}, hitsOf(t, inner, toks))
	require.Zero(t, told.Stats().Malformed)

	untold := subscribe(t, js, &countingIndex{inner: inner}, "untold", sc, true)
	waitFor(t, untold, pub, seq)
	require.Equal(t, uint64(1), untold.Stats().Malformed, "32-byte hashes expected")

	for _, n := range []int{-1, kvevents.MaxHashSize + 1} {
		_, err := natsjs.NewSubscriber(t.Context(), js, inner, natsjs.SubscriberConfig{Replica: "bad", Stream: sc, HashSize: n})
		require.ErrorIs(t, err, natsjs.ErrInvalid)
	}
	for _, sub := range []*natsjs.Subscriber{byIndex, told, untold} {
		require.NoError(t, sub.Close())
	}
}
