package prefix

import (
	"encoding/binary"
	"math/bits"
)

// The fast 64-bit scheme. The index keys its child table with it whatever Hasher is
// configured (so a slow hasher never slows a lookup), and the default Hasher, Fast64,
// reports it with the published constants below.
//
// It is a wyhash-style multiply-fold over the block's tokens, two independent lanes so
// that the multiplications overlap. It is not cryptographic: hashes only pick a table slot
// and label a block; equality is always decided on tokens.
//
// Keyed: every constant XORed into a multiplication's operands is a secret. Fast64 uses
// the published ones, which is what events must carry (a router recomputes them). The
// index's own table keys use secrets drawn from a per-index seed (see WithSeed): with the
// published constants anyone can make blocks whose keys collide by the million (a token
// pair equal to a constant zeroes a multiplication, and everything folded into it), and
// the one table shared by every namespace would make every tenant pay for them.

const (
	fastRoot = 0x6b7670616765a5a5 // parent of a namespace's first block ("kvpage")
	fastP0   = 0xa0761d6478bd642f
	fastP1   = 0xe7037ed1a0b428db
	fastP2   = 0x8ebc6af09c88c6e3
	fastP3   = 0x589965cc75374cc3
	fastP4   = 0x1d8e4e27c47d124f
	tagLoRA  = 0x9e3779b97f4a7c15
	tagMM    = 0xc2b2ae3d27d4eb4f
	tagSalt  = 0x165667b19e3779f9
	// tagMMOffset tags the offset of an (identifier, offset) multimodal key.
	tagMMOffset = 0x27d4eb2f165667c5
)

// secret is the set of constants one instance of the scheme folds in.
type secret struct{ p0, p1, p2, p3, p4 uint64 }

// fastSecret is the published instance: Fast64's, and the table's when unseeded.
var fastSecret = secret{fastP0, fastP1, fastP2, fastP3, fastP4}

// secretFrom derives a table's secrets from seed (splitmix64 steps), each odd and with
// both halves nonzero, so that no operand is ever multiplied by a weak constant.
func secretFrom(seed uint64) secret {
	next := func() uint64 {
		for {
			seed += 0x9e3779b97f4a7c15
			z := seed
			z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
			z = (z ^ z>>27) * 0x94d049bb133111eb
			z ^= z >> 31
			if uint32(z) != 0 && z>>32 != 0 {
				return z | 1
			}
		}
	}
	return secret{next(), next(), next(), next(), next()}
}

// mum multiplies a by b as 128 bits and folds the halves: the core mixing step.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// pair packs two tokens into one 64-bit word.
func pair(a, b int32) uint64 { return uint64(uint32(a)) | uint64(uint32(b))<<32 }

// hashTokens chains parent with one block of tokens. The tokens are hashed on their own
// first (contentHash), and only then folded with the parent in one multiplication: the
// chain from one block's key to the next is a single multiply, so a lookup's successive
// blocks overlap in the CPU instead of waiting for each other's whole hash.
func hashTokens(parent uint64, t []int32, s *secret) uint64 {
	return chain(parent, contentHash(t, s), s)
}

// chain folds a block's content hash into its parent's key.
func chain(parent, content uint64, s *secret) uint64 { return mum(content^s.p1, parent^s.p3) }

// contentHash hashes a block's tokens: two lanes, each folding 16 bytes per multiplication
// (wyhash's step), chained within the lane so that order matters.
func contentHash(t []int32, s *secret) uint64 {
	a, b := s.p0, s.p1
	for len(t) >= 8 {
		t8 := t[:8:8]
		a = mum(pair(t8[0], t8[1])^s.p2, pair(t8[2], t8[3])^a)
		b = mum(pair(t8[4], t8[5])^s.p3, pair(t8[6], t8[7])^b)
		t = t[8:]
	}
	for len(t) >= 2 {
		a = mum(pair(t[0], t[1])^s.p2, a^s.p4)
		t = t[2:]
	}
	if len(t) == 1 {
		b = mum(uint64(uint32(t[0]))^s.p3, b^s.p4)
	}
	return mum(a^s.p4, b^s.p0)
}

// content16 is contentHash for a block of exactly 16 tokens, unrolled.
func content16(t *[16]int32, s *secret) uint64 {
	a := mum(pair(t[0], t[1])^s.p2, pair(t[2], t[3])^s.p0)
	b := mum(pair(t[4], t[5])^s.p3, pair(t[6], t[7])^s.p1)
	a = mum(pair(t[8], t[9])^s.p2, pair(t[10], t[11])^a)
	b = mum(pair(t[12], t[13])^s.p3, pair(t[14], t[15])^b)
	return mum(a^s.p4, b^s.p0)
}

// same16 compares two blocks of 16 tokens as 8 words, with one branch.
func same16(a, b *[16]int32) bool {
	return (pair(a[0], a[1])^pair(b[0], b[1]))|(pair(a[2], a[3])^pair(b[2], b[3]))|
		(pair(a[4], a[5])^pair(b[4], b[5]))|(pair(a[6], a[7])^pair(b[6], b[7]))|
		(pair(a[8], a[9])^pair(b[8], b[9]))|(pair(a[10], a[11])^pair(b[10], b[11]))|
		(pair(a[12], a[13])^pair(b[12], b[13]))|(pair(a[14], a[15])^pair(b[14], b[15])) == 0
}

// hashString hashes an extra key (a LoRA name, a multimodal hash, a salt).
func hashString(s string) uint64 {
	h := uint64(len(s)) ^ fastP0
	for len(s) >= 8 {
		h = mum(binary.LittleEndian.Uint64([]byte(s[:8]))^fastP1, h^fastP2)
		s = s[8:]
	}
	var tail uint64
	for i := 0; i < len(s); i++ {
		tail |= uint64(s[i]) << (8 * i)
	}
	return mum(tail^fastP3, h^fastP4)
}

// mixExtra folds one extra key, tagged by kind, into a block hash.
func mixExtra(h, tag, v uint64) uint64 { return mum(h^v, tag) }

// fastBlock is the whole scheme: the default Hasher's Block and the index's table key.
func fastBlock(parent uint64, tokens []int32, e Extra) uint64 {
	h := hashTokens(parent, tokens, &fastSecret)
	if e.LoRA != "" {
		h = mixExtra(h, tagLoRA, hashString(e.LoRA))
	}
	for i, m := range e.MM {
		h = mixExtra(h, tagMM, hashString(m))
		if e.MMOffsets != nil {
			h = mixExtra(h, tagMMOffset, uint64(e.MMOffsets[i]))
		}
	}
	if e.Salt != "" {
		h = mixExtra(h, tagSalt, hashString(e.Salt))
	}
	return h
}

// Fast64 is the default Hasher: 64-bit, non-cryptographic, deterministic across runs and
// machines, and shared with the index's own table so that it costs nothing extra. Hashes
// are written big-endian.
type Fast64 struct{}

// Name returns "fast64".
func (Fast64) Name() string { return "fast64" }

// Size returns 8.
func (Fast64) Size() int { return 8 }

// Root writes the parent hash of a namespace's first block.
func (Fast64) Root(dst []byte) { binary.BigEndian.PutUint64(dst, fastRoot) }

// Block writes the hash of one block chained to parent.
func (Fast64) Block(dst, parent []byte, tokens []int32, extra Extra) {
	binary.BigEndian.PutUint64(dst, fastBlock(binary.BigEndian.Uint64(parent), tokens, extra))
}
