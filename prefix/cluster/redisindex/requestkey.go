package redisindex

import (
	"encoding/binary"
	"hash/fnv"
	"math"
)

// KeyHasher computes llm-d's request keys: the chained 64-bit hashes its indexer stores
// blocks under (llm-d-kv-cache, pkg/kvcache/kvblock/token_processor.go). Each key is
// FNV-64a over the RFC 8949 canonical CBOR of [parent key, block tokens, extra], where
// extra is nil for a text block or the block's multimodal identifiers as [{"Hash": id}],
// and the first parent is the key of [FNV-64a(seed), nil, model name]. The model name is
// the LoRA adapter's name when the block was computed under one. A kvpage router and
// llm-d's scheduler that share one Redis must agree on the block size, the seed (llm-d's
// hashSeed) and the model name. The seed is independent of the servers' PYTHONHASHSEED:
// llm-d computes request keys from the tokens a BlockStored event carries and maps the
// event's engine keys onto them ("dual-key design", llm-d-kv-cache docs/architecture.md).
//
// A KeyHasher reuses one buffer: it is not safe for concurrent use.
type KeyHasher struct {
	blockSize int
	seedHash  uint64
	buf       []byte
}

// NewKeyHasher returns a hasher of request keys in blocks of blockSize tokens (llm-d's
// blockSizeTokens) under seed (its hashSeed).
func NewKeyHasher(blockSize int, seed string) (*KeyHasher, error) {
	if blockSize <= 0 || blockSize > MaxBlockSize {
		return nil, ErrBlockSize
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(seed))
	return &KeyHasher{blockSize: blockSize, seedHash: h.Sum64()}, nil
}

// BlockSize returns the tokens per request key.
func (k *KeyHasher) BlockSize() int { return k.blockSize }

// Root returns the parent key of a model's first block.
func (k *KeyHasher) Root(model string) uint64 {
	b := append(k.buf[:0], 0x83)
	b = appendCBORUint(b, 0, k.seedHash)
	b = append(b, 0xf6) // nil tokens encode as CBOR null
	b = appendCBORText(b, model)
	k.buf = b
	return fnv64a(b)
}

// Block returns the key of one block of tokens after parent. mm lists the block's
// multimodal identifiers, none for a text block.
func (k *KeyHasher) Block(parent uint64, tokens []int32, mm []string) uint64 {
	b := append(k.buf[:0], 0x83)
	b = appendCBORUint(b, 0, parent)
	b = appendCBORUint(b, 4, uint64(len(tokens)))
	for _, t := range tokens {
		b = appendCBORUint(b, 0, uint64(uint32(t)))
	}
	if len(mm) == 0 {
		b = append(b, 0xf6)
	} else {
		b = appendCBORUint(b, 4, uint64(len(mm)))
		for _, id := range mm {
			b = append(b, 0xa1, 0x64, 'H', 'a', 's', 'h') // {"Hash": id}
			b = appendCBORText(b, id)
		}
	}
	k.buf = b
	return fnv64a(b)
}

// Keys appends to dst the keys of every full block of tokens after parent (0 for the
// model's root) and returns dst. Text only: a prompt with multimodal inputs goes block by
// block through Block.
func (k *KeyHasher) Keys(dst []uint64, parent uint64, model string, tokens []int32) []uint64 {
	if parent == 0 {
		parent = k.Root(model)
	}
	for i := 0; i+k.blockSize <= len(tokens); i += k.blockSize {
		parent = k.Block(parent, tokens[i:i+k.blockSize], nil)
		dst = append(dst, parent)
	}
	return dst
}

func appendCBORUint(b []byte, major byte, v uint64) []byte {
	m := major << 5
	switch {
	case v < 24:
		return append(b, m|byte(v))
	case v <= math.MaxUint8:
		return append(b, m|24, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), v)
}

func appendCBORText(b []byte, s string) []byte {
	return append(appendCBORUint(b, 3, uint64(len(s))), s...)
}

func fnv64a(b []byte) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, c := range b {
		h ^= uint64(c)
		h *= prime
	}
	return h
}
