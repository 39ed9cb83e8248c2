package kvevents

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

// cborUintForm maps bits.Len32 of a value to the number of argument bytes of its shortest
// CBOR unsigned form (0: the value sits in the initial byte, which needs v < 24) and the
// initial byte's additional information for the longer forms.
var cborUintForm = [33]struct{ n, info byte }{
	0: {0, 0}, 1: {0, 0}, 2: {0, 0}, 3: {0, 0}, 4: {0, 0}, 5: {0, 0}, // 5 bits: v < 24 checked apart
	6: {1, 24}, 7: {1, 24}, 8: {1, 24},
	9: {2, 25}, 10: {2, 25}, 11: {2, 25}, 12: {2, 25}, 13: {2, 25}, 14: {2, 25}, 15: {2, 25}, 16: {2, 25},
	17: {4, 26}, 18: {4, 26}, 19: {4, 26}, 20: {4, 26}, 21: {4, 26}, 22: {4, 26}, 23: {4, 26}, 24: {4, 26},
	25: {4, 26}, 26: {4, 26}, 27: {4, 26}, 28: {4, 26}, 29: {4, 26}, 30: {4, 26}, 31: {4, 26}, 32: {4, 26},
}

// appendCBORTokens appends each token as appendCBORInt would. Token widths vary at random,
// so rather than branch per token it looks the form up and always writes 5 bytes, keeping
// only the form's length; a negative token takes the general path.
func appendCBORTokens(dst []byte, toks []int32) []byte {
	dst = slices.Grow(dst, 5*len(toks)+4)
	n := len(dst)
	buf := dst[:cap(dst)]
	for _, t := range toks {
		if t < 0 {
			n = len(appendCBORInt(buf[:n], int64(t)))
			continue
		}
		v := uint32(t)
		f := cborUintForm[bits.Len32(v)]
		if f.n == 0 && v >= 24 { // 24..31: one argument byte
			f = cborUintForm[6]
		}
		if f.n == 0 {
			buf[n] = byte(v)
		} else {
			buf[n] = cborUint | f.info
		}
		binary.BigEndian.PutUint32(buf[n+1:n+5], v<<(32-8*uint32(f.n)))
		n += 1 + int(f.n)
	}
	return buf[:n]
}
