package kvevents_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/kvevents"
)

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
