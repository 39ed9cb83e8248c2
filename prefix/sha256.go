package prefix

import (
	"crypto/sha256"
	"encoding/binary"
)

// SHA256 is a cryptographic Hasher: each block's hash is the SHA-256 of the parent hash,
// the block's tokens (little-endian int32) and its extra keys, each key length-prefixed and
// tagged so that no two different inputs share an encoding (a multimodal key's offset, in
// the (identifier, offset) form, follows its identifier as a tagged 8-byte integer). Use it where hashes leave the
// process and a collision must be out of reach; it is not vLLM's sha256_cbor scheme (that
// one lives in prefix/vllmhash).
//
// A SHA256 value reuses an internal buffer: it is not safe for concurrent use, like the
// index that drives it. The zero value is ready to use.
type SHA256 struct{ buf []byte }

// NewSHA256 returns a SHA-256 hasher.
func NewSHA256() *SHA256 { return &SHA256{} }

// Name returns "sha256".
func (*SHA256) Name() string { return "sha256" }

// Size returns 32.
func (*SHA256) Size() int { return sha256.Size }

// Root writes SHA-256("kvpage") as the parent hash of a namespace's first block.
func (*SHA256) Root(dst []byte) {
	sum := sha256.Sum256([]byte("kvpage"))
	copy(dst, sum[:])
}

// Block writes SHA-256(parent, tokens, extra keys) into dst.
func (h *SHA256) Block(dst, parent []byte, tokens []int32, extra Extra) {
	b := append(h.buf[:0], parent...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(tokens)))
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	b = appendKey(b, 'L', extra.LoRA)
	for i, m := range extra.MM {
		b = appendKey(b, 'M', m)
		if extra.MMOffsets != nil { // the (identifier, offset) form: tag 'O', 8 bytes
			b = binary.LittleEndian.AppendUint64(append(b, 'O'), uint64(extra.MMOffsets[i]))
		}
	}
	b = appendKey(b, 'S', extra.Salt)
	h.buf = b
	sum := sha256.Sum256(b)
	copy(dst, sum[:])
}

func appendKey(b []byte, tag byte, s string) []byte {
	if s == "" {
		return b
	}
	b = append(b, tag)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}
