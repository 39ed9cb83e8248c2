package kvevents_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix/kvevents"
)

// Block hashes of vLLM's sha256_cbor with PYTHONHASHSEED=42 (see package vllmhash's
// vectors): tokens 0..15 and 16..31 without extras, and two blocks with extras.
const (
	plain0 = "63876f948a5f9ef88191c7d6554fbeeea5c622d4da15d0d527bd352623590b0d"
	plain1 = "78a71559304e96e785d46658e382ff9b8b5f10f918102e3ac1b4060a29bae320"
	extra0 = "d35d8c02db2bde5866b7c72ad60de6332413b21b0e7f22e165e676d80ab39a9e"
	extra1 = "ae8bb6a2a705b7324779b50da32df5ca50d402c261599039feaeb5cd19e91eed"
)

// unhex decodes hex written with spaces between the pieces of a hand-assembled item.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err)
	return b
}

func seqTokens(from, to int32) []int32 {
	out := make([]int32, 0, to-from)
	for v := from; v < to; v++ {
		out = append(out, v)
	}
	return out
}

// newBatcher is kvevents.NewBatcher, failing the test on an error.
func newBatcher(t require.TestingT, opts ...kvevents.Option) *kvevents.Batcher {
	b, err := kvevents.NewBatcher(opts...)
	require.NoError(t, err)
	return b
}
