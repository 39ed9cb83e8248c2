package kvevents_test

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// A golden payload built without this package, by Python's msgpack (use_bin_type=True) on
// the list msgspec writes for the BlockStored of an index in vLLM's (identifier, offset)
// form: LoRA "my-lora", salt "tenant-a", tokens 0..31 in blocks of 16, image "img-a" at
// [2, 34); each multimodal key of extra_keys is the tuple [identifier, offset].
//
//	[1700000000.5, [["BlockStored", [pair0, pair1], None, list(range(32)), 16, None, "GPU",
//	  "my-lora", [["my-lora", ["img-a", 2], "tenant-a"], ["my-lora", ["img-a", -14]]]]], 0]
//
// pair0 and pair1 are vllmhash's sha256_cbor hashes of these blocks (PYTHONHASHSEED=42).
const (
	pair0      = "598e1b8834e9a636d706dba30924e0c5bf498711663358261cfae0cf52274aa1"
	pair1      = "d940bbe614d6ebc5237bc10531596ac2aa2e525902f57fcd6cb2d58b9cfb50ad"
	goldenPair = "93cb41d954fc402000009199ab426c6f636b53746f72656492c420598e1b8834e9a636d706dba30924e0c5bf498711663358261cfae0cf52274aa1c420d940bbe614d6ebc5237bc10531596ac2aa2e525902f57fcd6cb2d58b9cfb50adc0dc0020000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f10c0a3475055a76d792d6c6f72619293a76d792d6c6f726192a5696d672d6102a874656e616e742d6192a76d792d6c6f726192a5696d672d61f200"
)

func TestBatcherEncodesMMPairsAsVLLM(t *testing.T) {
	p := &prefix.Prompt{
		Namespace: prefix.Namespace{LoRA: "my-lora", Salt: "tenant-a"},
		Tokens:    seqTokens(0, 32),
		MM:        []prefix.MMInput{{Hash: "img-a", Offset: 2, Length: 32}},
	}
	for _, tc := range []struct {
		name string
		obs  func(t *testing.T) (prefix.Observer, func() []byte)
	}{
		{"batcher", func(t *testing.T) (prefix.Observer, func() []byte) {
			b := newBatcher(t)
			return b, func() []byte { return b.AppendBatch(nil, goldenTS) }
		}},
		{"recorder", func(t *testing.T) (prefix.Observer, func() []byte) {
			return newPairRecorder(t)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs, payload := tc.obs(t)
			pool, err := blocks.New(4)
			require.NoError(t, err)
			x, err := prefix.New(pool, 16, prefix.WithHasher(vllmhash.NewSHA256CBOR("42")),
				prefix.WithMMKeyForm(prefix.MMKeyIdentifierOffset), prefix.WithObserver(obs))
			require.NoError(t, err)
			ids, err := pool.Allocate(nil, 2)
			require.NoError(t, err)
			var c prefix.Cursor
			_, err = x.Commit(&c, p, ids)
			require.NoError(t, err)
			require.Equal(t, goldenPair, hex.EncodeToString(payload()))
		})
	}

	b, err := kvevents.DecodeBatch(unhex(t, goldenPair))
	require.NoError(t, err)
	require.Len(t, b.Events, 1)
	require.Equal(t, [][]any{
		{"my-lora", []any{"img-a", int8(2)}, "tenant-a"},
		{"my-lora", []any{"img-a", int8(-14)}},
	}, b.Events[0].ExtraKeys)
}

// payloadSink hands each payload to a channel.
type payloadSink chan []byte

func (s payloadSink) Send(_ uint64, payload []byte) error { s <- payload; return nil }

// newPairRecorder returns a Recorder (timestamps goldenTS) and a function that flushes it
// and returns its one payload: the recording and replay keep the offsets too.
func newPairRecorder(t *testing.T) (prefix.Observer, func() []byte) {
	sink := make(payloadSink, 1)
	r, err := kvevents.NewRecorder(sink, kvevents.WithTimestamps(func() float64 { return goldenTS }))
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r, func() []byte {
		_, sealed := r.Flush()
		require.True(t, sealed)
		return <-sink
	}
}
