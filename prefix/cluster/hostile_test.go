package cluster_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// Issue 13 item 4: a valid BlockStored from the root (parent None, a 32-byte hash, 16
// tokens, block_size 16) with `extra_keys: []` panicked Apply in checkRoot (index out of
// range), inside a subscriber's goroutine: the router exited.
func TestClusterRootWithEmptyExtraKeys(t *testing.T) {
	toks := make([]any, 16)
	for i := range toks {
		toks[i] = i
	}
	payload, err := msgpack.Marshal([]any{1.0, []any{
		[]any{"BlockStored", []any{make([]byte, 32)}, nil, toks, 16, nil, "GPU", nil, []any{}},
	}, 0})
	require.NoError(t, err)
	b, err := kvevents.DecodeBatch(payload)
	require.NoError(t, err)
	c := newIndex(t, "42", 16)
	require.NotPanics(t, func() { require.NoError(t, c.Apply("a", b)) })
	require.Equal(t, 1, c.Stats("a").Blocks)
	require.NoError(t, c.CheckInvariants())
}

// Issue 13 item 8: NewClusterIndex(h, 0) was accepted and Route then divided by zero.
func TestNewClusterIndexRefusesBadArguments(t *testing.T) {
	h := vllmhash.NewSHA256CBOR("42")
	for name, f := range map[string]func() (*cluster.ClusterIndex, error){
		"block size 0":  func() (*cluster.ClusterIndex, error) { return cluster.NewClusterIndex(h, 0) },
		"block size -1": func() (*cluster.ClusterIndex, error) { return cluster.NewClusterIndex(h, -1) },
		"nil hasher":    func() (*cluster.ClusterIndex, error) { return cluster.NewClusterIndex(nil, 16) },
		"cap 0": func() (*cluster.ClusterIndex, error) {
			return cluster.NewClusterIndex(h, 16, cluster.WithMaxBlocksPerServer(0))
		},
	} {
		c, err := f()
		require.ErrorIs(t, err, cluster.ErrInvalidArgument, name)
		require.Nil(t, c, name)
	}
	c := newIndex(t, "42", 16)
	require.ErrorIs(t, c.Apply("a", nil), cluster.ErrInvalidArgument)
	require.Empty(t, c.Servers(), "a refused batch registers nothing")
}

// Issue 13 item 6: one server could make the router hold any number of blocks (8.4M cost
// +330 MiB). Past the per-server cap, stores are counted and not recorded; other servers
// and removals are unaffected.
func TestClusterCapsBlocksPerServer(t *testing.T) {
	c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), 4, cluster.WithMaxBlocksPerServer(5))
	require.NoError(t, err)
	p := prompt(prefix.Namespace{}, 0, 32) // 8 blocks
	require.NoError(t, c.Apply("a", storeChain(t, "42", p, 4, 0, 8)))
	st := c.Stats("a")
	require.Equal(t, 5, st.Blocks)
	require.EqualValues(t, 3, st.Refused)
	require.EqualValues(t, 5, st.Stored)
	_, n, _ := c.Route(p)
	require.Equal(t, 5, n, "the first blocks are kept")

	// Storing what it already holds is not refused; a removal makes room.
	require.NoError(t, c.Apply("a", storeChain(t, "42", p, 4, 0, 2)))
	require.EqualValues(t, 3, c.Stats("a").Refused)
	hs := vllmhash.PromptHashes(vllmhash.NewSHA256CBOR("42"), p, 4)
	require.NoError(t, c.Apply("a", removeBlocks(t, hs[4])))
	require.NoError(t, c.Apply("a", storeChain(t, "42", p, 4, 4, 6)))
	require.Equal(t, 5, c.Stats("a").Blocks)
	require.True(t, c.Holds("a", hs[4]))
	require.NoError(t, c.Apply("b", storeChain(t, "42", p, 4, 0, 5)))
	require.Equal(t, 5, c.Stats("b").Blocks)
	require.NoError(t, c.CheckInvariants())
}
