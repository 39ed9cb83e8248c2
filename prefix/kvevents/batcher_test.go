package kvevents_test

import (
	"bytes"
	"encoding/hex"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// Golden payloads, built without this package: Python's msgpack packing the lists that
// msgspec writes for vLLM's array_like structs (use_bin_type=True; floats as float64 and
// integers and strings in their shortest forms, as msgspec writes them):
//
//	[1700000000.5, [
//	  ["BlockStored", [plain0, plain1], None, list(range(32)), 16, None, "GPU", None, [None, None]],
//	  ["BlockStored", [extra0, extra1], None, [0,23,24,255,256,65535,65536,127999], 4, 7, "GPU",
//	   "my-lora", [["my-lora","img-a","tenant-a"], ["my-lora","img-a"]]],
//	  ["BlockRemoved", [plain1], "GPU"],
//	  ["AllBlocksCleared"]], 0]
//
// The second has every hash in its 64-bit form (int.from_bytes(h, "big") & (2**64-1)).
const (
	goldenBatch    = "93cb41d954fc402000009499ab426c6f636b53746f72656492c42063876f948a5f9ef88191c7d6554fbeeea5c622d4da15d0d527bd352623590b0dc42078a71559304e96e785d46658e382ff9b8b5f10f918102e3ac1b4060a29bae320c0dc0020000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f10c0a3475055c092c0c099ab426c6f636b53746f72656492c420d35d8c02db2bde5866b7c72ad60de6332413b21b0e7f22e165e676d80ab39a9ec420ae8bb6a2a705b7324779b50da32df5ca50d402c261599039feaeb5cd19e91eedc098001718ccffcd0100cdffffce00010000ce0001f3ff0407a3475055a76d792d6c6f72619293a76d792d6c6f7261a5696d672d61a874656e616e742d6192a76d792d6c6f7261a5696d672d6193ac426c6f636b52656d6f76656491c42078a71559304e96e785d46658e382ff9b8b5f10f918102e3ac1b4060a29bae320a347505591b0416c6c426c6f636b73436c656172656400"
	goldenIntBatch = "93cb41d954fc402000009499ab426c6f636b53746f72656492cf27bd352623590b0dcfc1b4060a29bae320c0dc0020000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f10c0a3475055c092c0c099ab426c6f636b53746f72656492cf65e676d80ab39a9ecffeaeb5cd19e91eedc098001718ccffcd0100cdffffce00010000ce0001f3ff0407a3475055a76d792d6c6f72619293a76d792d6c6f7261a5696d672d61a874656e616e742d6192a76d792d6c6f7261a5696d672d6193ac426c6f636b52656d6f76656491cfc1b4060a29bae320a347505591b0416c6c426c6f636b73436c656172656400"
	goldenTS       = 1700000000.5
)

// observeGolden feeds a Batcher the index events that the golden batch encodes.
func observeGolden(t testing.TB, o prefix.Observer) {
	o.BlockStored(&prefix.BlockStored{
		Hashes: cat(t, plain0, plain1), HashSize: 32,
		Blocks: []blocks.ID{1, 2}, Tokens: seqTokens(0, 32), BlockSize: 16,
	})
	o.BlockStored(&prefix.BlockStored{
		Hashes: cat(t, extra0, extra1), HashSize: 32,
		Blocks: []blocks.ID{3, 4}, Tokens: []int32{0, 23, 24, 255, 256, 65535, 65536, 127999}, BlockSize: 4,
		Namespace: prefix.Namespace{LoRA: "my-lora", Salt: "tenant-a"},
		MM:        [][]string{{"img-a"}, {"img-a"}},
	})
	o.BlockRemoved(&prefix.BlockRemoved{Hashes: cat(t, plain1), HashSize: 32, Blocks: []blocks.ID{2}})
	o.AllBlocksCleared()
}

func cat(t testing.TB, hexes ...string) []byte {
	var out []byte
	for _, h := range hexes {
		out = append(out, unhex(t, h)...)
	}
	return out
}

func loraIDs(name string) (int64, bool) { return 7, name == "my-lora" }

func TestBatcherWritesWhatVLLMWrites(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []kvevents.Option
		golden string
	}{
		{"hash bytes", nil, goldenBatch},
		{"64-bit hashes", []kvevents.Option{kvevents.WithIntHashes()}, goldenIntBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBatcher(t, append(tc.opts, kvevents.WithLoRAIDs(loraIDs))...)
			observeGolden(t, b)
			require.Equal(t, 4, b.Len())
			got := b.AppendBatch(nil, goldenTS)
			require.Equal(t, tc.golden, hex.EncodeToString(got))
			require.Zero(t, b.Len(), "sealing empties the batcher")
			require.Equal(t, "93cb41d954fc4020000090"+"00", hex.EncodeToString(b.AppendBatch(nil, goldenTS)), "an empty batch")
		})
	}
}

// Every field's position and msgpack type, read back with a generic decoder that knows
// nothing of this package.
func TestBatchFieldsWithAGenericDecoder(t *testing.T) {
	b := newBatcher(t, kvevents.WithLoRAIDs(loraIDs))
	observeGolden(t, b)
	var v any
	require.NoError(t, msgpack.Unmarshal(b.AppendBatch(nil, goldenTS), &v))

	batch := v.([]any)
	require.Len(t, batch, 3, "[ts, events, data_parallel_rank]")
	require.IsType(t, float64(0), batch[0], "the timestamp is a float64")
	require.Equal(t, goldenTS, batch[0])
	require.EqualValues(t, 0, batch[2], "vLLM's publisher fills in rank 0")
	events := batch[1].([]any)
	require.Len(t, events, 4)

	stored := events[0].([]any)
	require.Len(t, stored, 9)
	require.Equal(t, "BlockStored", stored[0], "the tag comes first")
	hashes := stored[1].([]any)
	require.Len(t, hashes, 2)
	require.IsType(t, []byte{}, hashes[0], "hashes travel as bin")
	require.Equal(t, plain0, hex.EncodeToString(hashes[0].([]byte)))
	require.Nil(t, stored[2], "a chain from the root has no parent")
	tokens := stored[3].([]any)
	require.Len(t, tokens, 32)
	require.EqualValues(t, 31, tokens[31])
	require.EqualValues(t, 16, stored[4], "block_size")
	require.Nil(t, stored[5], "lora_id")
	require.Equal(t, "GPU", stored[6], "medium")
	require.Nil(t, stored[7], "lora_name")
	require.Equal(t, []any{nil, nil}, stored[8], "extra_keys: one None per block")

	lora := events[1].([]any)
	require.Len(t, lora, 9)
	require.EqualValues(t, 7, lora[5], "lora_id")
	require.Equal(t, "my-lora", lora[7], "lora_name")
	require.Equal(t, []any{
		[]any{"my-lora", "img-a", "tenant-a"}, // LoRA, multimodal, salt on the first block
		[]any{"my-lora", "img-a"},
	}, lora[8])

	removed := events[2].([]any)
	require.Len(t, removed, 3)
	require.Equal(t, "BlockRemoved", removed[0])
	require.Equal(t, plain1, hex.EncodeToString(removed[1].([]any)[0].([]byte)))
	require.Equal(t, "GPU", removed[2])

	require.Equal(t, []any{"AllBlocksCleared"}, events[3])
}

func TestBatcherOptions(t *testing.T) {
	b := newBatcher(t, kvevents.WithoutExtraKeys(), kvevents.WithoutDataParallelRank(), kvevents.WithMedium(""))
	observeGolden(t, b)
	var v []any
	require.NoError(t, msgpack.Unmarshal(b.AppendBatch(nil, 1), &v))
	require.Len(t, v, 2, "no data_parallel_rank")
	events := v[1].([]any)
	require.Len(t, events[0], 8, "no extra_keys: vLLM's form before they were added")
	require.Nil(t, events[0].([]any)[6], "medium None")
	require.Nil(t, events[1].([]any)[5], "no LoRA id mapping: lora_id None")

	b = newBatcher(t, kvevents.WithDataParallelRank(3))
	var w []any
	require.NoError(t, msgpack.Unmarshal(b.AppendBatch(nil, 1), &w))
	require.EqualValues(t, 3, w[2])
}

// llmdBatch and friends have the shapes llm-d's KV-cache indexer decodes vLLM's events
// into (array-encoded structs that vmihailenco/msgpack fills only when the element count
// matches the field count exactly), so this checks that it can read our batches.
type llmdBatch struct {
	_                struct{} `msgpack:",array"`
	TS               float64
	Events           []msgpack.RawMessage
	DataParallelRank *int `msgpack:",omitempty"`
}

type llmdBlockStored struct {
	_               struct{} `msgpack:",array"`
	Tag             string
	BlockHashes     []any
	ParentBlockHash any
	TokenIds        []uint32
	BlockSize       int
	LoraID          *int    `msgpack:",omitempty"`
	Medium          *string `msgpack:",omitempty"`
	LoraName        *string `msgpack:",omitempty"`
	ExtraKeys       []any   `msgpack:",omitempty"`
}

type llmdBlockRemoved struct {
	_           struct{} `msgpack:",array"`
	Tag         string
	BlockHashes []any
	Medium      *string `msgpack:",omitempty"`
}

func TestLLMDIndexerShapesDecodeOurBatches(t *testing.T) {
	b := newBatcher(t, kvevents.WithLoRAIDs(loraIDs))
	observeGolden(t, b)
	var batch llmdBatch
	require.NoError(t, msgpack.Unmarshal(b.AppendBatch(nil, goldenTS), &batch))
	require.Len(t, batch.Events, 4)
	require.NotNil(t, batch.DataParallelRank)

	var stored llmdBlockStored
	require.NoError(t, msgpack.Unmarshal(batch.Events[1], &stored))
	require.Equal(t, "BlockStored", stored.Tag)
	require.Equal(t, []uint32{0, 23, 24, 255, 256, 65535, 65536, 127999}, stored.TokenIds)
	require.Equal(t, 4, stored.BlockSize)
	require.Equal(t, "my-lora", *stored.LoraName)
	// llm-d keys a hash by its last 8 bytes, big-endian: the 64-bit form.
	require.Equal(t, vllmhash.Uint64(unhex(t, extra0)), vllmhash.Uint64(stored.BlockHashes[0].([]byte)))

	var removed llmdBlockRemoved
	require.NoError(t, msgpack.Unmarshal(batch.Events[2], &removed))
	require.Equal(t, "GPU", *removed.Medium)
}

func TestBatcherDoesNotAllocate(t *testing.T) {
	if invariant.Enabled {
		t.Skip("allocation counts are meaningless with invariant checks on")
	}
	b := newBatcher(t)
	stored := &prefix.BlockStored{
		Hashes: make([]byte, 8*32), HashSize: 32, Blocks: make([]blocks.ID, 8),
		Tokens: seqTokens(100000, 100128), BlockSize: 16,
		Namespace: prefix.Namespace{LoRA: "l", Salt: "s"},
	}
	removed := &prefix.BlockRemoved{Hashes: make([]byte, 4*32), HashSize: 32, Blocks: make([]blocks.ID, 4)}
	out := make([]byte, 0, 64<<10)
	allocs := testing.AllocsPerRun(100, func() {
		for range 10 {
			b.BlockStored(stored)
			b.BlockRemoved(removed)
		}
		b.AllBlocksCleared()
		out = b.AppendBatch(out[:0], 1)
	})
	require.Zero(t, allocs)
}

// The hand-written token encoding is byte for byte the library's EncodeInt.
func TestTokenEncodingIsTheLibrarys(t *testing.T) {
	check := func(t require.TestingT, v int32) {
		var buf bytes.Buffer
		require.NoError(t, msgpack.NewEncoder(&buf).EncodeInt(int64(v)))
		require.Equal(t, buf.Bytes(), kvevents.AppendMsgpackInt(nil, v), "%d", v)
	}
	for _, v := range []int32{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxInt32, -1, -32, -33, -128, -129, -32768, -32769, math.MinInt32} {
		check(t, v)
	}
	rapid.Check(t, func(rt *rapid.T) { check(rt, rapid.Int32().Draw(rt, "v")) })

	// The slice encoder, which avoids a branch per token, writes the same bytes.
	rapid.Check(t, func(rt *rapid.T) {
		toks := rapid.SliceOf(rapid.OneOf(rapid.Int32Range(0, 300), rapid.Int32Range(0, 1<<20), rapid.Int32())).Draw(rt, "toks")
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 7).Draw(rt, "prefix")
		var buf bytes.Buffer
		buf.Write(prefix)
		enc := msgpack.NewEncoder(&buf)
		for _, v := range toks {
			require.NoError(rt, enc.EncodeInt(int64(v)))
		}
		require.Equal(rt, hex.EncodeToString(buf.Bytes()), hex.EncodeToString(kvevents.AppendMsgpackTokens(slices.Clone(prefix), toks)))
	})
}
