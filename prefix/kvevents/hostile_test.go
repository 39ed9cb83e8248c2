package kvevents_test

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/kvevents"
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
	return out
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Whatever a payload declares, one Decode allocates at most a small multiple of its size,
// returns (no stack overflow, whatever the nesting), and a failure is ErrMalformed.
func TestDecodeBoundsHostilePayloads(t *testing.T) {
	const size = 1 << 20
	for name, p := range hostilePayloads(size) {
		t.Run(name, func(t *testing.T) {
			var err error
			got := allocated(func() {
				var d kvevents.Decoder
				var b kvevents.Batch
				err = d.Decode(p, &b)
			})
			if err != nil {
				require.ErrorIs(t, err, kvevents.ErrMalformed)
			}
			t.Logf("%s: %d bytes, %.1fx the payload, err %v", name, got, float64(got)/float64(len(p)), err)
			require.LessOrEqual(t, got, uint64(32*len(p)), "allocated %d bytes for a payload of %d (%.1fx), err %v", got, len(p), float64(got)/float64(len(p)), err)
		})
	}
}

// Unknown elements nested deeper than the limit are refused, not skipped recursively.
func TestDecodeRefusesDeepNesting(t *testing.T) {
	p := hostilePayloads(1 << 16)
	for _, name := range []string{"nested arrays in a trailing element", "nested arrays in an unknown map key"} {
		_, err := kvevents.DecodeBatch(p[name])
		require.ErrorIs(t, err, kvevents.ErrMalformed, name)
		require.ErrorContains(t, err, "nested too deeply", name)
	}
	// Shallow nesting is still skipped.
	ok := append([]byte{0x94, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x90, 0x00}, bytes.Repeat([]byte{0x91}, 20)...)
	_, err := kvevents.DecodeBatch(append(ok, 0xc0))
	require.NoError(t, err)
}

// Byte-string hashes must have the configured hasher's size; integers of any width pass.
func TestDecodeChecksHashSize(t *testing.T) {
	removed := func(hash ...byte) []byte {
		r := appendStr(append(batchHead(1), 0x93), "BlockRemoved")
		r = append(append(r, 0x91), hash...)
		return append(append(r, 0xc0), 0x00)
	}
	bin := func(n int) []byte { return append([]byte{0xc4, byte(n)}, make([]byte, n)...) }
	for _, tc := range []struct {
		hashSize int
		hash     []byte
		ok       bool
	}{
		{0, bin(32), true},
		{0, bin(1), false},
		{0, bin(8), false},
		{0, bin(33), false},
		{8, bin(8), true},
		{8, bin(32), false},
		{0, []byte{0x01}, true},
		{0, []byte{0xcf, 1, 2, 3, 4, 5, 6, 7, 8}, true},
		{8, []byte{0xd0, 0x80}, true},
	} {
		d := kvevents.Decoder{HashSize: tc.hashSize}
		var b kvevents.Batch
		err := d.Decode(removed(tc.hash...), &b)
		if tc.ok {
			require.NoError(t, err, "%d %x", tc.hashSize, tc.hash)
		} else {
			require.ErrorIs(t, err, kvevents.ErrMalformed, "%d %x", tc.hashSize, tc.hash)
		}
	}
}

func TestDecodeRefusesOversizedPayloads(t *testing.T) {
	p := append(batchHead(0), 0x00)
	d := kvevents.Decoder{MaxPayload: len(p) - 1}
	var b kvevents.Batch
	require.ErrorIs(t, d.Decode(p, &b), kvevents.ErrMalformed)
	d.MaxPayload = len(p)
	require.NoError(t, d.Decode(p, &b))
}
