package vllmhash_test

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// The (identifier, offset) form of multimodal extra keys, vLLM's _gen_mm_extra_hash_keys
// since March 2026: an input overlapping a block is keyed by the tuple (identifier, offset
// of the input's start minus the block's first token). The digests were produced by
// Python's cbor2 (cbor2.dumps(obj, canonical=True), as vLLM's sha256_cbor) and hashlib on
// the objects vLLM's hash_block_tokens builds; the CBOR is assembled by hand below.
const (
	// vLLM's test_request_block_hasher: tokens 0..5, block size 3, images "hash1" at
	// [0, 3) and "hash2" at [3, 6), PYTHONHASHSEED=42.
	reqHasher0 = "df8476f10095f14c65f275fb278420b1b187700fe01f3a5c9eb14ddbebc6e752"
	reqHasher1 = "52a6adb8a7443f7dbc428c7a01e827b301af5e387959ac0e40b572c16a5b9867"
	// The same prompt in the identifier form (vLLM before March 2026).
	reqHasherOld0 = "e32d56c13aaa7eccc0b1f0183e926e251d5f83e643dc10b64b45c45ed981b0a4"
	reqHasherOld1 = "bfe26dbbe511f15cffd8eaf961be97d58406ddd5ffe603de582c5bd81652d00b"
	// LoRA "my-lora", salt "tenant-a", tokens 0..47 in blocks of 16, image "img-a" at
	// [2, 34) and "img-b" at [37, 40).
	pair0 = "598e1b8834e9a636d706dba30924e0c5bf498711663358261cfae0cf52274aa1"
	pair1 = "d940bbe614d6ebc5237bc10531596ac2aa2e525902f57fcd6cb2d58b9cfb50ad"
	pair2 = "44facae18c36576b5ee7df6c7f9ec50ebe80fe32770992f6789300960f5a74b5"
)

func TestSHA256CBORPairsMatchVLLM(t *testing.T) {
	seq := func(from, to int) string { // tokens from..to-1, all below 24 or below 256
		var s string
		for i := from; i < to; i++ {
			if i < 24 {
				s += hex.EncodeToString([]byte{byte(i)}) + " "
			} else {
				s += "18" + hex.EncodeToString([]byte{byte(i)}) + " "
			}
		}
		return s
	}
	for _, tc := range []blockVector{
		{
			name: "vLLM test_request_block_hasher block 0", parent: root42, tokens: seqTokens(0, 3),
			extra: prefix.Extra{MM: []string{"hash1"}, MMOffsets: []int{0}},
			cbor: "83 5820 " + root42 + " 83 " + seq(0, 3) +
				" 81" + // extra keys: a 1-tuple
				" 82 65 6861736831 00", // the pair: array of 2, "hash1", offset 0
			digest: reqHasher0,
		},
		{
			name: "vLLM test_request_block_hasher block 1", parent: reqHasher0, tokens: seqTokens(3, 6),
			extra:  prefix.Extra{MM: []string{"hash2"}, MMOffsets: []int{0}},
			cbor:   "83 5820 " + reqHasher0 + " 83 " + seq(3, 6) + " 81 82 65 6861736832 00",
			digest: reqHasher1,
		},
		{
			name: "LoRA, a pair and the salt on the first block", parent: root42, tokens: seqTokens(0, 16),
			extra: prefix.Extra{LoRA: "my-lora", MM: []string{"img-a"}, MMOffsets: []int{2}, Salt: "tenant-a"},
			cbor: "83 5820 " + root42 + " 90 " + seq(0, 16) +
				" 83 67 6d792d6c6f7261" + // ("my-lora",
				" 82 65 696d672d61 02" + // ("img-a", 2),
				" 68 74656e616e742d61", // "tenant-a")
			digest: pair0,
		},
		{
			name: "an input begun in the previous block has a negative offset", parent: pair0, tokens: seqTokens(16, 32),
			extra: prefix.Extra{LoRA: "my-lora", MM: []string{"img-a"}, MMOffsets: []int{-14}},
			cbor: "83 5820 " + pair0 + " 90 " + seq(16, 32) +
				" 82 67 6d792d6c6f7261" +
				" 82 65 696d672d61 2d", // -14: major type 1, argument 13, in the initial byte
			digest: pair1,
		},
		{
			name: "two inputs, one ending and one starting inside the block", parent: pair1, tokens: seqTokens(32, 48),
			extra: prefix.Extra{MM: []string{"img-a", "img-b"}, MMOffsets: []int{-30, 5}},
			cbor: "83 5820 " + pair1 + " 90 " + seq(32, 48) +
				" 82" +
				" 82 65 696d672d61 381d" + // -30: major type 1, argument 29 in one more byte
				" 82 65 696d672d62 05",
			digest: pair2,
		},
	} {
		t.Run(tc.name, tc.check)
	}
}

// vLLM's test_request_block_hasher, through PromptHashesForm and through an index hashing
// with SHA256CBOR, in both forms: the older form's hashes are what they always were.
func TestRequestBlockHasherAsVLLM(t *testing.T) {
	p := &prefix.Prompt{
		Tokens: seqTokens(0, 6),
		MM:     []prefix.MMInput{{Hash: "hash1", Offset: 0, Length: 3}, {Hash: "hash2", Offset: 3, Length: 3}},
	}
	index := func(t *testing.T, form prefix.MMKeyForm) [][]byte {
		pool, err := blocks.New(4)
		require.NoError(t, err)
		x, err := prefix.New(pool, 3, prefix.WithHasher(vllmhash.NewSHA256CBOR("42")), prefix.WithMMKeyForm(form))
		require.NoError(t, err)
		ids, err := pool.Allocate(nil, 2)
		require.NoError(t, err)
		var c prefix.Cursor
		_, err = x.Commit(&c, p, ids)
		require.NoError(t, err)
		var hs [][]byte
		for _, id := range ids {
			h, ok := x.Hash(nil, id)
			require.True(t, ok)
			hs = append(hs, h)
		}
		return hs
	}
	promptHashes := func(_ *testing.T, form prefix.MMKeyForm) [][]byte {
		return vllmhash.PromptHashesForm(vllmhash.NewSHA256CBOR("42"), p, 3, form)
	}
	for _, via := range []struct {
		name   string
		hashes func(*testing.T, prefix.MMKeyForm) [][]byte
	}{{"PromptHashesForm", promptHashes}, {"Index", index}} {
		for _, tc := range []struct {
			form prefix.MMKeyForm
			want []string
		}{
			{prefix.MMKeyIdentifierOffset, []string{reqHasher0, reqHasher1}},
			{prefix.MMKeyIdentifier, []string{reqHasherOld0, reqHasherOld1}},
		} {
			t.Run(via.name+"/"+tc.form.String(), func(t *testing.T) {
				hs := via.hashes(t, tc.form)
				require.Len(t, hs, 2)
				for i := range hs {
					require.Equal(t, tc.want[i], hex.EncodeToString(hs[i]), "block %d", i)
				}
			})
		}
	}
	old := vllmhash.PromptHashes(vllmhash.NewSHA256CBOR("42"), p, 3)
	require.Equal(t, reqHasherOld0, hex.EncodeToString(old[0]), "PromptHashes keeps the identifier form")
}

// vLLM's test_generate_block_hash_extra_keys and the cache-salt case of
// test_generate_block_hash_extra_keys_cache_salt, with their exact expected keys. vLLM
// asks for arbitrary token ranges; BlockExtraForm takes block i of a block size, so each
// range is the block of the same start and length.
func TestBlockExtraFormGenerateBlockHashExtraKeys(t *testing.T) {
	mm := []prefix.MMInput{{Hash: "hash1", Offset: 0, Length: 5}, {Hash: "hash2", Offset: 10, Length: 5}}
	p := &prefix.Prompt{Tokens: seqTokens(0, 20), MM: mm}
	for _, tc := range []struct {
		name       string
		p          *prefix.Prompt
		block, bs  int
		wantMM     []string
		wantOffs   []int
		wantSalt   string
		wantNoKeys bool
	}{
		{name: "tokens [0, 5): (hash1, 0)", p: p, block: 0, bs: 5, wantMM: []string{"hash1"}, wantOffs: []int{0}},
		{name: "tokens [3, 6): (hash1, -3)", p: p, block: 1, bs: 3, wantMM: []string{"hash1"}, wantOffs: []int{-3}},
		{name: "tokens [6, 9): none", p: p, block: 2, bs: 3, wantNoKeys: true},
		{name: "tokens [0, 15): (hash1, 0), (hash2, 10)", p: p, block: 0, bs: 15, wantMM: []string{"hash1", "hash2"}, wantOffs: []int{0, 10}},
		{name: "tokens [15, 30): none", p: p, block: 1, bs: 15, wantNoKeys: true},
		{
			name: "cache salt after the pair", block: 0, bs: 5,
			p:      &prefix.Prompt{Namespace: prefix.Namespace{Salt: "salt"}, Tokens: seqTokens(0, 20), MM: mm[:1]},
			wantMM: []string{"hash1"}, wantOffs: []int{0}, wantSalt: "salt",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := vllmhash.BlockExtraForm(tc.p, tc.block, tc.bs, prefix.MMKeyIdentifierOffset, nil, nil)
			require.Equal(t, tc.wantSalt, e.Salt)
			if tc.wantNoKeys {
				require.Empty(t, e.MM)
				require.Nil(t, e.MMOffsets, "no input, no pairs: vLLM's None")
				return
			}
			require.Equal(t, tc.wantMM, e.MM)
			require.Equal(t, tc.wantOffs, e.MMOffsets)
			old := vllmhash.BlockExtraForm(tc.p, tc.block, tc.bs, prefix.MMKeyIdentifier, nil, nil)
			require.Equal(t, tc.wantMM, old.MM)
			require.Nil(t, old.MMOffsets, "the identifier form carries no offsets")
		})
	}
}

func TestBlockExtraFormReusesScratch(t *testing.T) {
	p := &prefix.Prompt{Tokens: seqTokens(0, 64), MM: []prefix.MMInput{{Hash: "a", Offset: 5, Length: 40}}}
	mm, offs := make([]string, 0, 4), make([]int, 0, 4)
	allocs := testing.AllocsPerRun(100, func() {
		for b := range 4 {
			e := vllmhash.BlockExtraForm(p, b, 16, prefix.MMKeyIdentifierOffset, mm, offs)
			mm = e.MM[:0]
			if e.MMOffsets != nil { // nil for a block without inputs: keep the scratch
				offs = e.MMOffsets[:0]
			}
		}
	})
	require.Zero(t, allocs)
}

func TestSHA256CBORPanicsOnMismatchedOffsets(t *testing.T) {
	h := vllmhash.NewSHA256CBOR("42")
	dst := make([]byte, vllmhash.HashSize)
	require.Panics(t, func() {
		h.Block(dst, nil, seqTokens(0, 4), prefix.Extra{MM: []string{"a", "b"}, MMOffsets: []int{0}})
	})
}
