package vllmhash_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// Any block, any extras: the hasher equals SHA-256 over fxamacker's core deterministic
// encoding of the same Python-shaped object.
func TestSHA256CBORAgreesWithFxamacker(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		parent := rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(rt, "parent")
		tokens := rapid.SliceOfN(rapid.Int32(), 0, 300).Draw(rt, "tokens")
		e := prefix.Extra{
			LoRA: rapid.StringMatching(`[a-z0-9-]{0,40}`).Draw(rt, "lora"),
			MM:   rapid.SliceOfN(rapid.StringMatching(`[0-9a-f]{1,64}`), 0, 3).Draw(rt, "mm"),
			Salt: rapid.StringMatching(`.{0,300}`).Draw(rt, "salt"),
		}
		if rapid.Bool().Draw(rt, "pairs") && len(e.MM) > 0 {
			e.MMOffsets = rapid.SliceOfN(rapid.IntRange(-1<<40, 1<<40), len(e.MM), len(e.MM)).Draw(rt, "offsets")
		}
		got := make([]byte, vllmhash.HashSize)
		vllmhash.NewSHA256CBOR("seed").Block(got, parent, tokens, e)
		want := sha256.Sum256(fxBlock(t, parent, tokens, e))
		require.Equal(rt, want[:], got)
	})
}

func TestBlockExtra(t *testing.T) {
	p := &prefix.Prompt{
		Namespace: prefix.Namespace{LoRA: "ad", Salt: "s"},
		Tokens:    make([]int32, 64),
		MM: []prefix.MMInput{
			{Hash: "a", Offset: 2, Length: 3},   // block 0 only
			{Hash: "b", Offset: 14, Length: 20}, // blocks 0, 1 and 2
			{Hash: "c", Offset: 48, Length: 1},  // block 3 only
		},
	}
	for _, tc := range []struct {
		block int
		want  prefix.Extra
	}{
		{0, prefix.Extra{LoRA: "ad", MM: []string{"a", "b"}, Salt: "s"}},
		{1, prefix.Extra{LoRA: "ad", MM: []string{"b"}}},
		{2, prefix.Extra{LoRA: "ad", MM: []string{"b"}}},
		{3, prefix.Extra{LoRA: "ad", MM: []string{"c"}}},
	} {
		got := vllmhash.BlockExtra(p, tc.block, 16, nil)
		require.Equal(t, tc.want.LoRA, got.LoRA, "block %d", tc.block)
		require.Equal(t, tc.want.Salt, got.Salt, "block %d", tc.block)
		require.Equal(t, tc.want.MM, got.MM, "block %d", tc.block)
	}
	// An input ending exactly where a block starts does not overlap it.
	q := &prefix.Prompt{Tokens: make([]int32, 32), MM: []prefix.MMInput{{Hash: "x", Offset: 0, Length: 16}}}
	require.Empty(t, vllmhash.BlockExtra(q, 1, 16, nil).MM)
}

func TestPromptHashesChainFromTheRoot(t *testing.T) {
	h := vllmhash.NewSHA256CBOR("42")
	p := &prefix.Prompt{Tokens: seqTokens(0, 40)} // two full blocks and a partial one
	got := vllmhash.PromptHashes(h, p, 16)
	require.Len(t, got, 2)
	require.Equal(t, plain0, hex.EncodeToString(got[0]))
	require.Equal(t, plain1, hex.EncodeToString(got[1]))

	salted := vllmhash.PromptHashes(h, &prefix.Prompt{Namespace: prefix.Namespace{Salt: "t"}, Tokens: seqTokens(0, 32)}, 16)
	require.NotEqual(t, got[0], salted[0], "the salt changes the first block")
	require.NotEqual(t, got[1], salted[1], "and, through the chain, every later one")
}

func TestSHA256CBORBlockDoesNotAllocate(t *testing.T) {
	if invariant.Enabled {
		t.Skip("allocation counts are meaningless with invariant checks on")
	}
	h := vllmhash.NewSHA256CBOR("42")
	parent, dst := make([]byte, 32), make([]byte, 32)
	tokens := seqTokens(70000, 70016)
	e := prefix.Extra{LoRA: "l", MM: []string{"m"}, Salt: "s"}
	allocs := testing.AllocsPerRun(100, func() { h.Block(dst, parent, tokens, e) })
	require.Zero(t, allocs)
}

// The hasher's slice encoder for tokens writes what the per-value encoder writes, which
// the vectors and fxamacker tests pin to RFC 8949.
func TestCBORTokensMatchPerValueEncoding(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		toks := rapid.SliceOf(rapid.OneOf(rapid.Int32Range(0, 300), rapid.Int32Range(0, 1<<20), rapid.Int32())).Draw(rt, "toks")
		want := []byte{}
		for _, v := range toks {
			want = vllmhash.AppendCBORInt(want, int64(v))
		}
		require.Equal(rt, want, vllmhash.AppendCBORTokens(nil, toks))
	})
	for _, v := range []int32{0, 23, 24, 31, 32, 255, 256, 65535, 65536, 1<<31 - 1} {
		require.Equal(t, vllmhash.AppendCBORInt(nil, int64(v)), vllmhash.AppendCBORTokens(nil, []int32{v}), "%d", v)
	}
}
