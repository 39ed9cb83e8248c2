package vllmhash

// A hand-rolled encoder for the few CBOR items a vLLM block hash needs, appending into a
// caller's buffer so that hashing a block allocates nothing. It follows RFC 8949's core
// deterministic encoding (section 4.2.1): every length and integer takes its shortest
// form, and lengths are always definite. Only the item kinds below are needed: unsigned and
// negative integers, byte strings, text strings, arrays, and null.

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// CBOR major types (RFC 8949 section 3.1), already shifted into the top three bits.
const (
	cborUint  = 0 << 5
	cborNeg   = 1 << 5
	cborBytes = 2 << 5
	cborText  = 3 << 5
	cborArray = 4 << 5
	cborNull  = 0xf6 // major type 7, simple value 22
)

// appendCBORHead appends the head of an item of major type major whose argument (a value
// or a length) is n, in the shortest form: inside the initial byte below 24, else in the
// 1, 2, 4 or 8 bytes that follow it (additional information 24 to 27).
func appendCBORHead(dst []byte, major byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(dst, major|byte(n))
	case n <= 0xff:
		return append(dst, major|24, byte(n))
	case n <= 0xffff:
		return append(dst, major|25, byte(n>>8), byte(n))
	case n <= 0xffffffff:
		return append(dst, major|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	default:
		return append(dst, major|27, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
			byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

// appendCBORInt appends the integer v: major type 0 when v >= 0, else major type 1 with
// argument -1-v, as Python's cbor2 encodes an int.
func appendCBORInt(dst []byte, v int64) []byte {
	if v >= 0 {
		return appendCBORHead(dst, cborUint, uint64(v))
	}
	return appendCBORHead(dst, cborNeg, uint64(-1-v))
}

// appendCBORBytes appends b as a byte string (Python bytes).
func appendCBORBytes(dst, b []byte) []byte {
	return append(appendCBORHead(dst, cborBytes, uint64(len(b))), b...)
}

// appendCBORText appends s as a text string (Python str). s is taken as UTF-8 as it is:
// a Go string that is not valid UTF-8 has no Python str counterpart.
func appendCBORText(dst []byte, s string) []byte {
	return append(appendCBORHead(dst, cborText, uint64(len(s))), s...)
}

// cborUintForm gives CBOR's unsigned forms (major type 0): the value in the initial byte
// below 24 (appendCBORTokens moves 24..31 to the next entry), then 1, 2 or 4 argument bytes.
var cborUintForm = func() (t [33]intForm) {
	for l := range t {
		switch {
		case l <= 5:
			t[l] = intForm{0, cborUint, 0xff}
		case l <= 8:
			t[l] = intForm{1, cborUint | 24, 0}
		case l <= 16:
			t[l] = intForm{2, cborUint | 25, 0}
		default:
			t[l] = intForm{4, cborUint | 26, 0}
		}
	}
	return t
}()

// appendCBORTokens appends each token as appendCBORInt would. Token widths vary at random,
// so instead of a branch per token it looks the form up and always stores 8 bytes at once,
// keeping only the form's length (kvevents' msgpack token encoder is the same loop).
func appendCBORTokens(dst []byte, toks []int32) []byte {
	dst = slices.Grow(dst, 5*len(toks)+8)
	n := len(dst)
	buf := dst[:cap(dst)]
	for _, t := range toks {
		if t < 0 {
			n = len(appendCBORInt(buf[:n], int64(t)))
			continue
		}
		v := uint32(t)
		l := bits.Len32(v)
		if l == 5 && v >= 24 { // inline values stop at 23, not at a power of 2
			l = 6
		}
		f := cborUintForm[l]
		w := uint64(f.code|byte(v)&f.mask)<<56 | uint64(v<<(32-8*uint32(f.n)))<<24
		binary.BigEndian.PutUint64(buf[n:n+8], w)
		n += 1 + int(f.n)
	}
	return buf[:n]
}

// intForm is a shortest encoding of a non-negative integer, by bits.Len32 of the value:
// n argument bytes after an initial byte that is code, or, where mask is 0xff, the value
// itself (CBOR's values below 24).
type intForm struct{ n, code, mask byte }
