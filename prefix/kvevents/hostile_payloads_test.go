package kvevents_test

import (
	"bytes"
	"encoding/binary"
	"math"
)

// Hostile payloads, built by hand so that each class is exactly what it says.

// batchHead is [ts, [n events ...] with a 3-element batch (events, then the caller's
// last element).
func batchHead(events int) []byte {
	b := []byte{0x93, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0}
	return appendArrayHeader(b, events)
}

func appendArrayHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n < 1<<16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
	}
}

func appendStr(b []byte, s string) []byte { return append(append(b, 0xa0|byte(len(s))), s...) }

// HostilePayloads are the decoder's hostile input classes, each about size bytes.
func hostilePayloads(size int) map[string][]byte {
	out := map[string][]byte{}

	// Unknown trailing element: size nested one-element arrays (old: recursive skip, a
	// fatal stack overflow at 10 MB).
	nested := append([]byte{0x94, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x90, 0x00}, bytes.Repeat([]byte{0x91}, size)...)
	out["nested arrays in a trailing element"] = append(nested, 0xc0)

	// The same inside an unknown map key's value of a map-form event.
	m := append(batchHead(1), 0x82)
	m = appendStr(appendStr(m, "type"), "AllBlocksCleared")
	m = appendStr(m, "x")
	m = append(append(m, bytes.Repeat([]byte{0x91}, size)...), 0xc0)
	out["nested arrays in an unknown map key"] = append(m, 0x00)

	// One BlockRemoved of 1-byte integer hashes (positive fixints).
	n := size - 32
	r := appendArrayHeader(appendStr(append(batchHead(1), 0x93), "BlockRemoved"), n)
	r = append(r, bytes.Repeat([]byte{0x01}, n)...)
	out["1-byte integer hashes"] = append(append(r, 0xc0), 0x00)

	// 1-byte byte-string hashes (c4 01 xx).
	n = (size - 32) / 3
	r = appendArrayHeader(appendStr(append(batchHead(1), 0x93), "BlockRemoved"), n)
	r = append(r, bytes.Repeat([]byte{0xc4, 0x01, 0x07}, n)...)
	out["1-byte bin hashes"] = append(append(r, 0xc0), 0x00)

	// AllBlocksCleared, over and over: the smallest events.
	n = (size - 16) / 18
	a := batchHead(n)
	for range n {
		a = appendStr(append(a, 0x91), "AllBlocksCleared")
	}
	out["AllBlocksCleared flood"] = append(a, 0x00)

	// A BlockStored whose extra_keys holds one empty tuple per byte.
	n = size - 64
	s := appendStr(append(batchHead(1), 0x99), "BlockStored")
	s = append(s, 0x90, 0xc0, 0x90, 0x10, 0xc0, 0xc0, 0xc0)
	s = appendArrayHeader(s, n)
	s = append(s, bytes.Repeat([]byte{0x90}, n)...)
	out["empty extra-key tuples"] = append(s, 0x00)

	// extra_keys of one tuple holding 1-byte values.
	s = appendStr(append(batchHead(1), 0x99), "BlockStored")
	s = append(s, 0x90, 0xc0, 0x90, 0x10, 0xc0, 0xc0, 0xc0, 0x91)
	s = appendArrayHeader(s, n)
	s = append(s, bytes.Repeat([]byte{0x01}, n)...)
	out["1-byte extra keys"] = append(s, 0x00)

	// Tokens of one byte each.
	s = appendStr(append(batchHead(1), 0x95), "BlockStored")
	s = append(s, 0x90, 0xc0)
	s = appendArrayHeader(s, n)
	s = append(s, bytes.Repeat([]byte{0x01}, n)...)
	out["1-byte tokens"] = append(append(s, 0x10), 0x00)

	// Declared lengths the payload cannot hold: 2^32-1 hashes, a 4 GiB lora_name, each
	// followed by zeros up to size.
	r = appendStr(append(batchHead(1), 0x93), "BlockRemoved")
	r = binary.BigEndian.AppendUint32(append(r, 0xdd), math.MaxUint32)
	out["2^32-1 hashes declared"] = append(r, make([]byte, size-len(r))...)
	s = appendStr(append(batchHead(1), 0x98), "BlockStored")
	s = append(s, 0x91, 0x01, 0xc0, 0x91, 0x01, 0x01, 0xc0, 0xc0)
	s = binary.BigEndian.AppendUint32(append(s, 0xdb), math.MaxUint32)
	out["4 GiB lora_name declared"] = append(s, make([]byte, size-len(s))...)
	return out
}
