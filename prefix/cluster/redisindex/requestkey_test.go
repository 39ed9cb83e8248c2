package redisindex_test

import (
	"hash/fnv"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
)

type mmHash struct{ Hash string }

// llmdHash is llm-d's token processor hash, as its code computes it: FNV-64a over the
// canonical CBOR of [parent, tokens, extra].
func llmdHash(t *testing.T, parent uint64, toks []uint32, extra any) uint64 {
	enc, err := cbor.CanonicalEncOptions().EncMode()
	require.NoError(t, err)
	b, err := enc.Marshal([]any{parent, toks, extra})
	require.NoError(t, err)
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}

func TestKeyHasherIsLLMDs(t *testing.T) {
	for _, seed := range []string{"", "42", "a longer seed of more than twenty-four bytes"} {
		kh, err := redisindex.NewKeyHasher(4, seed)
		require.NoError(t, err)
		s := fnv.New64a()
		_, _ = s.Write([]byte(seed))
		root := llmdHash(t, s.Sum64(), nil, "model-x")
		require.Equal(t, root, kh.Root("model-x"))
		toks := []int32{0, 23, 24, 255, 256, 65535, 65536, 1<<31 - 1}
		u := make([]uint32, len(toks))
		for i, v := range toks {
			u[i] = uint32(v)
		}
		want := llmdHash(t, root, u[:4], nil)
		want2 := llmdHash(t, want, u[4:], nil)
		require.Equal(t, []uint64{want, want2}, kh.Keys(nil, 0, "model-x", append(toks, 9, 9))) // the partial block is left out
		mm := llmdHash(t, root, u[:4], []mmHash{{"img"}, {"a-long-identifier-of-more-than-24-bytes-0123456789"}})
		require.Equal(t, mm, kh.Block(root, toks[:4], []string{"img", "a-long-identifier-of-more-than-24-bytes-0123456789"}))
	}
	_, err := redisindex.NewKeyHasher(0, "")
	require.ErrorIs(t, err, redisindex.ErrBlockSize)
}

// The fast field parser agrees with encoding/json on every field it accepts, and leaves
// the rest to it.
func TestParseFieldFastPathAgrees(t *testing.T) {
	for _, e := range []redisindex.Entry{
		{Server: "pod-a", Tier: "gpu"},
		{Server: "10.0.0.7:8000", Tier: "cpu", Speculative: true, HasGroup: true, Group: 3},
		{Server: "pod<&>", Tier: "disk"},        // json escapes < & > as \\u003c...
		{Server: "pod \"quoted\"", Tier: "gpu"}, // an escape
		{Server: "pödé", Tier: "gpu"},           // not ASCII
	} {
		got, ok := redisindex.ParseField(e.Field())
		require.True(t, ok, e.Field())
		require.Equal(t, e, got, e.Field())
	}
	for _, f := range []string{
		`{"PodIdentifier":"","DeviceTier":"gpu","Speculative":false,"HasGroup":false,"GroupIdx":0}`,
		`{"PodIdentifier":"a","DeviceTier":"gpu","Speculative":maybe,"HasGroup":false,"GroupIdx":0}`,
		`{"PodIdentifier":"a","DeviceTier":"gpu","Speculative":false,"HasGroup":false,"GroupIdx":-1}x`,
		`{"PodIdentifier":"a"`,
		`[]`,
	} {
		_, ok := redisindex.ParseField(f)
		require.False(t, ok, f)
	}
	e, ok := redisindex.ParseField(`{"GroupIdx":1,"PodIdentifier":"b","DeviceTier":"gpu","HasGroup":true}`)
	require.True(t, ok, "another field order still parses (through encoding/json)")
	require.Equal(t, redisindex.Entry{Server: "b", Tier: "gpu", HasGroup: true, Group: 1}, e)
}
