package vllmhash_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// The vectors below were derived without this package's code, three ways that must agree:
//   - the CBOR bytes are assembled by hand from RFC 8949 (section 3 heads, section 4.2.1
//     shortest forms), one commented piece at a time;
//   - the digests were produced by Python's cbor2 (the library vLLM's sha256_cbor calls,
//     as cbor2.dumps(obj, canonical=True)) and hashlib.sha256 on the same objects vLLM's
//     hash_block_tokens builds: (parent bytes, tuple of token ids, tuple of extras or None);
//   - fxamacker/cbor's core deterministic encoder must produce the same bytes.

// unhex decodes hex written with spaces between the pieces of a hand-assembled item.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err)
	return b
}

// Digests from cbor2 + hashlib (see above).
const (
	root42    = "9fa6eb003f14425eb9c8e6baacfbcaab26257357b829c7bfa74ffcc4f31c1780"
	rootEmpty = "8d33f520a3c4cef80d2453aef81b612bfe1cb44c8b2025630ad38662763f13d3"
	root0     = "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e"
	plain0    = "63876f948a5f9ef88191c7d6554fbeeea5c622d4da15d0d527bd352623590b0d"
	plain1    = "78a71559304e96e785d46658e382ff9b8b5f10f918102e3ac1b4060a29bae320"
	extra0    = "d35d8c02db2bde5866b7c72ad60de6332413b21b0e7f22e165e676d80ab39a9e"
	extra1    = "ae8bb6a2a705b7324779b50da32df5ca50d402c261599039feaeb5cd19e91eed"

	// PYTHONHASHSEED unset: the root is the hash of vLLM's DEFAULT_NONE_HASH_SEED,
	// cbor2.dumps("vllm-none-hash", canonical=True), and the first two blocks of 0..31
	// chain on it as above.
	rootDefault   = "9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0"
	defaultPlain0 = "dc918a88b139e5afe60b88eda27508d4aee16c10fdc354791efea06206ac0749"
	defaultPlain1 = "c300ec275d7bf08af8fc63e76cdc0086911bbc7091e03c5cf892553bef84ef0c"
	// The seed of vLLM's test_none_hash, case 2.
	rootPythonHashSeed = "fc5ef6ef5e203c1069cf0180253363371d11683169c06d71b04979169dda057b"
)

func TestSHA256CBORRootMatchesVLLM(t *testing.T) {
	for _, tc := range []struct {
		seed, cbor, digest string
	}{
		{"42", "62 3432", root42}, // text string (major 3) of length 2: 0x62, then "42"
		{"", "60", rootEmpty},     // empty text string; PYTHONHASHSEED set but empty
		{"0", "61 30", root0},     // text string of length 1
		// vLLM's DEFAULT_NONE_HASH_SEED: a text string of length 14 (0x60|14).
		{"vllm-none-hash", "6e 766c6c6d2d6e6f6e652d68617368", rootDefault},
		{"python hash seed", "70 707974686f6e20686173682073656564", rootPythonHashSeed}, // 0x60|16
	} {
		t.Run(tc.seed, func(t *testing.T) {
			enc := unhex(t, tc.cbor)
			sum := sha256.Sum256(enc)
			require.Equal(t, tc.digest, hex.EncodeToString(sum[:]), "hand-assembled CBOR vs cbor2")
			fx, err := coreDet(t).Marshal(tc.seed)
			require.NoError(t, err)
			require.Equal(t, enc, fx, "fxamacker core deterministic")

			got := make([]byte, vllmhash.HashSize)
			vllmhash.NewSHA256CBOR(tc.seed).Root(got)
			require.Equal(t, tc.digest, hex.EncodeToString(got))
		})
	}
}

func TestSHA256CBORBlocksMatchVLLM(t *testing.T) {
	seq16 := "00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f" // 0..15 fit in the initial byte
	for _, tc := range []blockVector{
		{
			name: "first block, no extras", parent: root42, tokens: seqTokens(0, 16),
			cbor: "83" + // array of 3
				" 5820 " + root42 + // byte string of 32 (0x58 = major 2, 1-byte length)
				" 90 " + seq16 + // array of 16 (0x80|16)
				" f6", // null: no extra keys
			digest: plain0,
		},
		{
			name: "second block chains on the first", parent: plain0, tokens: seqTokens(16, 32),
			cbor: "83 5820 " + plain0 +
				" 90 10 11 12 13 14 15 16 17" + // 16..23 still fit in the initial byte
				" 1818 1819 181a 181b 181c 181d 181e 181f" + // 24..31 take 0x18 + one byte
				" f6",
			digest: plain1,
		},
		{
			name: "LoRA, image and salt on the first block", parent: root42,
			tokens: []int32{0, 23, 24, 255},
			extra:  prefix.Extra{LoRA: "my-lora", MM: []string{"img-a"}, Salt: "tenant-a"},
			cbor: "83 5820 " + root42 +
				" 84 00 17 1818 18ff" + // 4 tokens: 0, 23, 24 (0x18 0x18), 255 (0x18 0xff)
				" 83" + // extras: a 3-tuple in vLLM's order
				" 67 6d792d6c6f7261" + // "my-lora"
				" 65 696d672d61" + // "img-a"
				" 68 74656e616e742d61", // "tenant-a"
			digest: extra0,
		},
		{
			name: "wide tokens, salt left out after the first block", parent: extra0,
			tokens: []int32{256, 65535, 65536, 127999},
			extra:  prefix.Extra{LoRA: "my-lora", MM: []string{"img-a"}},
			cbor: "83 5820 " + extra0 +
				" 84 190100 19ffff 1a00010000 1a0001f3ff" + // 2-byte and 4-byte arguments
				" 82 67 6d792d6c6f7261 65 696d672d61",
			digest: extra1,
		},
	} {
		t.Run(tc.name, tc.check)
	}
}

// blockVector is one block of a test vector: its parent hash, tokens and extra keys, the
// CBOR vLLM hashes for it (assembled by hand) and the digest cbor2 and hashlib gave.
type blockVector struct {
	name   string
	parent string
	tokens []int32
	extra  prefix.Extra
	cbor   string
	digest string
}

// check asserts that the three derivations agree with the hasher: the hand-assembled
// CBOR hashes to the digest, fxamacker's encoder writes the same CBOR, and SHA256CBOR
// (PYTHONHASHSEED=42) gives the digest.
func (v blockVector) check(t *testing.T) {
	enc := unhex(t, v.cbor)
	sum := sha256.Sum256(enc)
	require.Equal(t, v.digest, hex.EncodeToString(sum[:]), "hand-assembled CBOR vs cbor2")
	require.Equal(t, enc, fxBlock(t, unhex(t, v.parent), v.tokens, v.extra), "fxamacker core deterministic")
	got := make([]byte, vllmhash.HashSize)
	vllmhash.NewSHA256CBOR("42").Block(got, unhex(t, v.parent), v.tokens, v.extra)
	require.Equal(t, v.digest, hex.EncodeToString(got))
}

// vLLM's test_none_hash for sha256_cbor: without PYTHONHASHSEED the root is
// hash_fn(DEFAULT_NONE_HASH_SEED), the same on every initialisation; with it, the hash of
// the variable's value.
func TestSHA256CBORDefaultRootIsVLLMs(t *testing.T) {
	require.Equal(t, "vllm-none-hash", vllmhash.DefaultSeed)
	root := func(h *vllmhash.SHA256CBOR) string {
		b := make([]byte, vllmhash.HashSize)
		h.Root(b)
		return hex.EncodeToString(b)
	}
	require.Equal(t, rootDefault, root(vllmhash.NewSHA256CBORDefault()), "PYTHONHASHSEED unset")
	require.Equal(t, rootDefault, root(vllmhash.NewSHA256CBORDefault()), "deterministic across initialisations")
	require.Equal(t, rootPythonHashSeed, root(vllmhash.NewSHA256CBOR("python hash seed")), "PYTHONHASHSEED set")
	require.NotEqual(t, rootEmpty, rootDefault, "an empty PYTHONHASHSEED is a seed, not an unset one")

	// The chain under the default root, block for block as cbor2 and hashlib give it.
	first := blockVector{
		name: "first block under the default root", parent: rootDefault, tokens: seqTokens(0, 16),
		cbor:   "83 5820 " + rootDefault + " 90 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f f6",
		digest: defaultPlain0,
	}
	first.check(t)
	got := vllmhash.PromptHashes(vllmhash.NewSHA256CBORDefault(), &prefix.Prompt{Tokens: seqTokens(0, 40)}, 16)
	require.Len(t, got, 2)
	require.Equal(t, defaultPlain0, hex.EncodeToString(got[0]))
	require.Equal(t, defaultPlain1, hex.EncodeToString(got[1]))
	require.Equal(t, uint64(2233398808101521225), vllmhash.Uint64(got[0]), "the 64-bit form vLLM publishes")
}

// ResolveSeed is vLLM's resolve_none_hash_seed for sha256_cbor over os.LookupEnv's answer.
func TestResolveSeed(t *testing.T) {
	for _, tc := range []struct {
		value string
		set   bool
		want  string
	}{
		{"", false, vllmhash.DefaultSeed},
		{"ignored", false, vllmhash.DefaultSeed}, // LookupEnv gives "" with false; only set counts
		{"", true, ""},                           // os.getenv returns "", which is not None
		{"42", true, "42"},
		{"random", true, "random"}, // vLLM hashes the text; only CPython's hash() reads it as a mode
		{vllmhash.DefaultSeed, true, vllmhash.DefaultSeed},
	} {
		require.Equal(t, tc.want, vllmhash.ResolveSeed(tc.value, tc.set), "%q set=%v", tc.value, tc.set)
	}
	t.Setenv("PYTHONHASHSEED", "0")
	require.Equal(t, "0", vllmhash.ResolveSeed(os.LookupEnv("PYTHONHASHSEED")))
}

func TestSHA256CBOREmptyParentIsRoot(t *testing.T) {
	h := vllmhash.NewSHA256CBOR("42")
	got := make([]byte, vllmhash.HashSize)
	h.Block(got, nil, seqTokens(0, 16), prefix.Extra{})
	require.Equal(t, plain0, hex.EncodeToString(got), "vLLM substitutes NONE_HASH for a missing parent")
}

func TestSHA256CBORFromRoot(t *testing.T) {
	var root [vllmhash.HashSize]byte
	copy(root[:], unhex(t, root42))
	h := vllmhash.NewSHA256CBORFromRoot(root)
	got := make([]byte, vllmhash.HashSize)
	h.Block(got, nil, seqTokens(0, 16), prefix.Extra{})
	require.Equal(t, plain0, hex.EncodeToString(got))
	require.Equal(t, "sha256_cbor", h.Name())
	require.Equal(t, 32, h.Size())
}

func TestUint64IsTheLastEightBytes(t *testing.T) {
	// Python: int.from_bytes(h, "big") & ((1 << 64) - 1), vLLM's maybe_convert_block_hash.
	for _, tc := range []struct {
		hash string
		want uint64
	}{
		{root42, 12056132650316601216},
		{plain0, 2863503375995570957},
		{plain1, 13957787785847563040},
		{extra0, 7342686912738728606},
		{extra1, 18351805424088981229},
		{"0102", 0x0102},
	} {
		require.Equal(t, tc.want, vllmhash.Uint64(unhex(t, tc.hash)), tc.hash)
	}
}

func TestNegativeTokenEncodesAsCBORNegative(t *testing.T) {
	// Token ids are never negative in vLLM, but the hasher must still be a function of the
	// CBOR data model: -1 is major type 1 with argument 0 (0x20), -25 is 0x38 0x18.
	h := vllmhash.NewSHA256CBOR("42")
	got := make([]byte, vllmhash.HashSize)
	h.Block(got, nil, []int32{-1, -25}, prefix.Extra{})
	enc := unhex(t, "83 5820 "+root42+" 82 20 3818 f6")
	require.Equal(t, enc, fxBlock(t, unhex(t, root42), []int32{-1, -25}, prefix.Extra{}))
	sum := sha256.Sum256(enc)
	require.Equal(t, sum[:], got)
}

func seqTokens(from, to int32) []int32 {
	out := make([]int32, 0, to-from)
	for t := from; t < to; t++ {
		out = append(out, t)
	}
	return out
}

func coreDet(t testing.TB) cbor.EncMode {
	t.Helper()
	em, err := cbor.CoreDetEncOptions().EncMode()
	require.NoError(t, err)
	return em
}

// fxBlock encodes what vLLM's hash_block_tokens hashes, with fxamacker's core
// deterministic encoder: an independent CBOR implementation.
func fxBlock(t testing.TB, parent []byte, tokens []int32, e prefix.Extra) []byte {
	t.Helper()
	toks := make([]int64, len(tokens))
	for i, tk := range tokens {
		toks[i] = int64(tk)
	}
	var extra any // nil encodes as CBOR null
	var keys []any
	if e.LoRA != "" {
		keys = append(keys, e.LoRA)
	}
	for i, m := range e.MM {
		if e.MMOffsets != nil {
			keys = append(keys, []any{m, int64(e.MMOffsets[i])}) // the tuple (identifier, offset)
			continue
		}
		keys = append(keys, m)
	}
	if e.Salt != "" {
		keys = append(keys, e.Salt)
	}
	if len(keys) > 0 {
		extra = keys
	}
	b, err := coreDet(t).Marshal([]any{parent, toks, extra})
	require.NoError(t, err)
	return b
}
