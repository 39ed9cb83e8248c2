package vllmhash

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/kvpage/kvpage/prefix"
)

// HashSize is the length in bytes of a sha256_cbor block hash.
const HashSize = sha256.Size

// SHA256CBOR is vLLM's sha256_cbor block hasher, reproduced bit for bit. A block's hash is
// SHA-256 over the RFC 8949 core deterministic CBOR encoding of the 3-element array
//
//	[parent hash (byte string), token ids (array of integers), extra keys (null or array)]
//
// where the extra keys are, in this order, the LoRA name, the multimodal inputs that
// overlap the block, and the cache salt on a namespace's first block only; with none of
// them the third element is null. A multimodal input is its identifier, or, when the Extra
// carries MMOffsets (prefix.MMKeyIdentifierOffset, vLLM since March 2026), the pair
// [identifier, offset of the input's start relative to the block's first token]. The first block's parent is the root: SHA-256
// over the CBOR text string of the seed (vLLM's NONE_HASH, made by init_none_hash).
//
// vLLM resolves the seed as resolve_none_hash_seed does: PYTHONHASHSEED when it is set (an
// empty value is a seed too), otherwise, for sha256_cbor, the fixed DefaultSeed, so that
// independent servers agree without configuration (NewSHA256CBORDefault; ResolveSeed
// applies the rule to an environment lookup). vLLM releases before that rule drew the
// root from os.urandom(32) when PYTHONHASHSEED was unset, as vLLM still does for its
// non-cryptographic xxhash schemes: no other process can reproduce such a root, but
// NewSHA256CBORFromRoot takes one if it is known.
//
// A SHA256CBOR encodes into a buffer it keeps, so Block allocates nothing in steady state;
// for the same reason one value must not be used by two goroutines at once.
type SHA256CBOR struct {
	root [HashSize]byte
	buf  []byte
}

var _ prefix.Hasher = (*SHA256CBOR)(nil)

// DefaultSeed is the seed vLLM hashes into its root when PYTHONHASHSEED is unset and the
// scheme is cryptographic, as sha256_cbor is (vllm/v1/core/kv_cache_utils.py,
// DEFAULT_NONE_HASH_SEED).
const DefaultSeed = "vllm-none-hash"

// ResolveSeed returns the seed a vLLM server hashes its root from, given its
// PYTHONHASHSEED as os.LookupEnv reports it: the value when it is set, even empty, and
// DefaultSeed otherwise (vLLM's resolve_none_hash_seed for sha256_cbor). So
//
//	vllmhash.NewSHA256CBOR(vllmhash.ResolveSeed(os.LookupEnv("PYTHONHASHSEED")))
//
// hashes as a vLLM server started in the same environment does.
func ResolveSeed(pythonHashSeed string, set bool) string {
	if set {
		return pythonHashSeed
	}
	return DefaultSeed
}

// NewSHA256CBORDefault returns the hasher of a vLLM server started without
// PYTHONHASHSEED: NewSHA256CBOR(DefaultSeed).
func NewSHA256CBORDefault() *SHA256CBOR { return NewSHA256CBOR(DefaultSeed) }

// NewSHA256CBOR returns the hasher of a vLLM server started with PYTHONHASHSEED=seed.
func NewSHA256CBOR(seed string) *SHA256CBOR {
	h := &SHA256CBOR{buf: make([]byte, 0, 256)}
	h.buf = appendCBORText(h.buf[:0], seed)
	h.root = sha256.Sum256(h.buf)
	return h
}

// NewSHA256CBORFromRoot returns a hasher whose first blocks chain under root: vLLM's
// NONE_HASH, for example the random one of a server of a vLLM release that drew it from
// os.urandom when PYTHONHASHSEED was unset.
func NewSHA256CBORFromRoot(root [HashSize]byte) *SHA256CBOR {
	return &SHA256CBOR{root: root, buf: make([]byte, 0, 256)}
}

// Name returns vLLM's name for the scheme, "sha256_cbor".
func (h *SHA256CBOR) Name() string { return "sha256_cbor" }

// Size returns 32.
func (h *SHA256CBOR) Size() int { return HashSize }

// Root writes the root hash (vLLM's NONE_HASH) into dst.
func (h *SHA256CBOR) Root(dst []byte) { copy(dst, h.root[:]) }

// Block writes the hash of one block into dst. An empty parent stands for the root, as
// vLLM substitutes NONE_HASH for a missing parent.
func (h *SHA256CBOR) Block(dst, parent []byte, tokens []int32, extra prefix.Extra) {
	if len(parent) == 0 {
		parent = h.root[:]
	}
	b := append(h.buf[:0], cborArray|3)
	b = appendCBORBytes(b, parent)
	b = appendCBORHead(b, cborArray, uint64(len(tokens)))
	b = appendCBORTokens(b, tokens)
	b = appendExtraKeys(b, extra)
	h.buf = b
	sum := sha256.Sum256(b)
	copy(dst, sum[:])
}

// appendExtraKeys appends a block's extra keys as vLLM's generate_block_hash_extra_keys
// builds them: a tuple (CBOR array) of LoRA name, multimodal keys and salt, or None (CBOR
// null) when the block has none. A multimodal key is its identifier (a text string), or in
// the (identifier, offset) form, when extra.MMOffsets is set, the 2-tuple of identifier and
// offset (an array of a text string and an integer). It panics when MMOffsets is set with
// a length other than MM's: the keys would be no one's.
func appendExtraKeys(b []byte, extra prefix.Extra) []byte {
	pairs := extra.MMOffsets != nil
	if pairs && len(extra.MMOffsets) != len(extra.MM) {
		panic("vllmhash: Extra.MMOffsets and Extra.MM differ in length")
	}
	n := len(extra.MM)
	if extra.LoRA != "" {
		n++
	}
	if extra.Salt != "" {
		n++
	}
	if n == 0 {
		return append(b, cborNull)
	}
	b = appendCBORHead(b, cborArray, uint64(n))
	if extra.LoRA != "" {
		b = appendCBORText(b, extra.LoRA)
	}
	for i, mm := range extra.MM {
		if pairs {
			b = append(b, cborArray|2)
			b = appendCBORText(b, mm)
			b = appendCBORInt(b, int64(extra.MMOffsets[i]))
			continue
		}
		b = appendCBORText(b, mm)
	}
	if extra.Salt != "" {
		b = appendCBORText(b, extra.Salt)
	}
	return b
}

// Uint64 returns the 64-bit form of a block hash that vLLM publishes when
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES is set: the hash read as a big-endian unsigned
// integer, reduced modulo 2^64, that is its last 8 bytes. A hash shorter than 8 bytes is
// read whole. The chain itself always runs on the full 32-byte hashes.
func Uint64(hash []byte) uint64 {
	if len(hash) >= 8 {
		return binary.BigEndian.Uint64(hash[len(hash)-8:])
	}
	var v uint64
	for _, c := range hash {
		v = v<<8 | uint64(c)
	}
	return v
}
