package cluster_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// serverEvents is the batch a kvpage server (a prefix.Index hashing with vLLM's scheme
// under seed, in multimodal key form form) publishes when it caches p's full blocks.
func serverEvents(t *testing.T, seed string, form prefix.MMKeyForm, p *prefix.Prompt, bs int) *kvevents.Batch {
	t.Helper()
	b := newBatcher(t)
	n := len(p.Tokens) / bs
	pool, err := blocks.New(n)
	require.NoError(t, err)
	x, err := prefix.New(pool, bs, prefix.WithHasher(vllmhash.NewSHA256CBOR(seed)), prefix.WithMMKeyForm(form), prefix.WithObserver(b))
	require.NoError(t, err)
	ids, err := pool.Allocate(nil, n)
	require.NoError(t, err)
	var c prefix.Cursor
	_, err = x.Commit(&c, p, ids)
	require.NoError(t, err)
	return decode(t, b.AppendBatch(nil, 1))
}

// A router finds a server's multimodal blocks only when it hashes in the server's form,
// and its root check reads both forms of extra_keys: a server with another seed is caught
// whichever form it publishes.
func TestClusterMMKeyForms(t *testing.T) {
	p := prompt(prefix.Namespace{LoRA: "l", Salt: "s"}, 0, 32)
	p.MM = []prefix.MMInput{{Hash: "img", Offset: 2, Length: 20}} // blocks 0 to 5 of 4 tokens
	for _, tc := range []struct {
		name               string
		router, server     prefix.MMKeyForm
		seed               string
		blocks, mismatches int
	}{
		{"pairs, pairs", prefix.MMKeyIdentifierOffset, prefix.MMKeyIdentifierOffset, "42", 8, 0},
		{"identifiers, identifiers", prefix.MMKeyIdentifier, prefix.MMKeyIdentifier, "42", 8, 0},
		{"identifiers, pairs", prefix.MMKeyIdentifier, prefix.MMKeyIdentifierOffset, "42", 0, 0},
		{"pairs, identifiers", prefix.MMKeyIdentifierOffset, prefix.MMKeyIdentifier, "42", 0, 0},
		{"pairs from another seed", prefix.MMKeyIdentifierOffset, prefix.MMKeyIdentifierOffset, "43", 0, 1},
		{"identifiers from another seed", prefix.MMKeyIdentifier, prefix.MMKeyIdentifier, "43", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), 4, cluster.WithMMKeyForm(tc.router))
			require.NoError(t, err)
			require.NoError(t, c.Apply("a", serverEvents(t, tc.seed, tc.server, p, 4)))
			require.Equal(t, []cluster.ServerHit{{Server: "a", Blocks: tc.blocks}}, match(t, c, p))
			require.EqualValues(t, tc.mismatches, c.Stats("a").RootMismatches)
			require.NoError(t, c.CheckInvariants())
		})
	}
	_, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("42"), 4, cluster.WithMMKeyForm(prefix.MMKeyIdentifierOffset+1))
	require.ErrorIs(t, err, cluster.ErrInvalidArgument)
}

// Extra keys in a shape vLLM does not write are not rehashed (no mismatch is claimed).
func TestClusterRootCheckSkipsOddExtraKeys(t *testing.T) {
	p := prompt(prefix.Namespace{}, 0, 4)
	for _, tc := range []struct {
		name string
		keys []any
	}{
		{"a string between pairs", []any{[]any{"a", int8(0)}, "x", []any{"b", int8(1)}}},
		{"two strings before the pairs", []any{"l", "m", []any{"a", int8(0)}}},
		{"a pair of three", []any{[]any{"a", int8(0), int8(1)}}},
		{"a pair without a string", []any{[]any{int8(1), int8(0)}}},
		{"a map", []any{map[string]any{"Hash": "a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newIndex(t, "42", 4)
			b := storeChain(t, "43", p, 4, 0, 1) // another seed: a rehash would count a mismatch
			b.Events[0].ExtraKeys = [][]any{tc.keys}
			require.NoError(t, c.Apply("a", b))
			require.Zero(t, c.Stats("a").RootMismatches)
		})
	}
}

// A pair's offset is rehashed whenever it fits an int, whichever msgpack width carried it
// (msgspec writes a non-negative integer unsigned, so a far offset arrives as a uint64):
// the check must not depend on the sign of the encoding. An offset no int holds is not
// rehashed.
func TestClusterRootCheckOffsetWidths(t *testing.T) {
	p := prompt(prefix.Namespace{}, 0, 4)
	for _, tc := range []struct {
		name       string
		off        any
		mismatches uint64
	}{
		{"int8", int8(-3), 1},
		{"uint32", uint32(math.MaxUint32), 1},
		{"int64 max", int64(math.MaxInt64), 1},
		{"int64 min", int64(math.MinInt64), 1},
		{"uint64 max int", uint64(math.MaxInt), 1},
		{"uint64 past int", uint64(math.MaxUint64), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newIndex(t, "42", 4)
			b := storeChain(t, "43", p, 4, 0, 1) // another seed: a rehash counts a mismatch
			b.Events[0].ExtraKeys = [][]any{{[]any{"img", tc.off}}}
			require.NoError(t, c.Apply("a", b))
			require.Equal(t, tc.mismatches, c.Stats("a").RootMismatches)
		})
	}
}
