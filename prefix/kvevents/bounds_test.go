package kvevents_test

import (
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// A writer refuses the options whose events a Decoder would refuse, so that no peer is
// ever sent a batch it must drop whole: NewBatcher and NewRecorder fail with
// ErrInvalidArgument. What they accept reads back.
func TestWriterRefusesWhatADecoderRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opt     kvevents.Option
		refused string
	}{
		{"group 0", kvevents.WithGroup(0), ""},
		{"group MaxGroup", kvevents.WithGroup(kvevents.MaxGroup), ""},
		{"group past MaxGroup", kvevents.WithGroup(kvevents.MaxGroup + 1), "WithGroup(32768)"},
		{"negative group", kvevents.WithGroup(-1), "WithGroup(-1)"},
		{"medium of MaxMediumBytes", kvevents.WithMedium(strings.Repeat("m", kvevents.MaxMediumBytes)), ""},
		{"medium past MaxMediumBytes", kvevents.WithMedium(strings.Repeat("m", kvevents.MaxMediumBytes+1)), "WithMedium of 65 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := kvevents.NewBatcher(tc.opt)
			r, rerr := kvevents.NewRecorder(payloadSink(make(chan []byte, 1)), tc.opt)
			if tc.refused != "" {
				require.ErrorIs(t, err, kvevents.ErrInvalidArgument)
				require.ErrorContains(t, err, tc.refused)
				require.Nil(t, b)
				require.ErrorIs(t, rerr, kvevents.ErrInvalidArgument)
				require.Nil(t, r)
				return
			}
			require.NoError(t, err)
			require.NoError(t, rerr)
			r.Close()
			b.BlockRemoved(&prefix.BlockRemoved{HashSize: 32, Hashes: make([]byte, 32), Blocks: make([]blocks.ID, 1)})
			_, err = kvevents.DecodeBatch(b.AppendBatch(nil, 1))
			require.NoError(t, err)
		})
	}
}

// An event whose own fields (from the index: a LoRA name, a tier's medium, a group) a
// Decoder would refuse is left out and counted, by a Batcher and by a Recorder; the rest
// of its batch reads back.
func TestWriterLeavesOutEventsADecoderRefuses(t *testing.T) {
	stored := func(lora, medium string, hasGroup bool, group int) *prefix.BlockStored {
		return &prefix.BlockStored{HashSize: 32, BlockSize: 1, Hashes: make([]byte, 32), Blocks: make([]blocks.ID, 1),
			Tokens: []int32{7}, Namespace: prefix.Namespace{LoRA: lora}, Medium: medium, HasGroup: hasGroup, Group: group}
	}
	long := strings.Repeat("l", kvevents.MaxLoRANameBytes)
	for _, tc := range []struct {
		name    string
		stored  *prefix.BlockStored
		removed *prefix.BlockRemoved
		refused bool
	}{
		{"LoRA name of MaxLoRANameBytes", stored(long, "", false, 0), nil, false},
		{"LoRA name past MaxLoRANameBytes", stored(long+"l", "", false, 0), nil, true},
		{"tier medium past MaxMediumBytes", stored("", strings.Repeat("m", kvevents.MaxMediumBytes+1), false, 0), nil, true},
		{"own group MaxGroup", stored("", "", true, kvevents.MaxGroup), nil, false},
		{"own group past MaxGroup", stored("", "", true, kvevents.MaxGroup+1), nil, true},
		{"own group negative", stored("", "", true, -1), nil, true},
		{"removal's group past MaxGroup", nil, &prefix.BlockRemoved{HashSize: 32, Hashes: make([]byte, 32), Blocks: make([]blocks.ID, 1), HasGroup: true, Group: kvevents.MaxGroup + 1}, true},
		{"removal's medium past MaxMediumBytes", nil, &prefix.BlockRemoved{HashSize: 32, Hashes: make([]byte, 32), Blocks: make([]blocks.ID, 1), Medium: strings.Repeat("m", kvevents.MaxMediumBytes+1)}, true},
	} {
		emit := func(o prefix.Observer) {
			o.AllBlocksCleared()
			if tc.stored != nil {
				o.BlockStored(tc.stored)
			} else {
				o.BlockRemoved(tc.removed)
			}
		}
		check := func(t *testing.T, payload []byte) {
			b, err := kvevents.DecodeBatch(payload)
			require.NoError(t, err)
			if tc.refused {
				require.Len(t, b.Events, 1)
				return
			}
			require.Len(t, b.Events, 2)
			if tc.stored != nil {
				require.Equal(t, tc.stored.Namespace.LoRA, b.Events[1].LoRAName)
			}
		}
		refused := uint64(0)
		if tc.refused {
			refused = 1
		}
		t.Run(tc.name+"/Batcher", func(t *testing.T) {
			b := newBatcher(t)
			emit(b)
			require.Equal(t, refused, b.Refused())
			check(t, b.AppendBatch(nil, 1))
		})
		t.Run(tc.name+"/Recorder", func(t *testing.T) {
			sink := payloadSink(make(chan []byte, 1))
			r, err := kvevents.NewRecorder(sink)
			require.NoError(t, err)
			emit(r)
			r.Flush()
			r.Close()
			require.Equal(t, refused, r.Stats().RefusedEvents)
			check(t, <-sink)
		})
	}
}

// storedWithLoRA is a one-event array-form batch: a BlockStored of one integer hash whose
// lora_name is the raw msgpack given.
func storedWithLoRA(loraName []byte) []byte {
	b := append(batchHead(1), 0x98) // 8 elements: no extra keys
	b = appendStr(b, "BlockStored")
	b = append(b, 0x91, 0x01, 0xc0, 0x91, 0x01, 0x01, 0xc0, 0xc0) // hashes, parent, tokens, size, lora_id, medium
	b = append(b, loraName...)
	return append(b, 0xc0) // rank
}

// lora_name is bounded by MaxLoRANameBytes, in both forms, before the decoder copies it.
func TestDecodeBoundsLoRAName(t *testing.T) {
	mp := func(v any) []byte { b, err := msgpack.Marshal(v); require.NoError(t, err); return b }
	long := strings.Repeat("l", kvevents.MaxLoRANameBytes)
	mapForm := func(name string) []byte {
		return mp(map[string]any{"ts": 1.0, "events": []any{map[string]any{
			"type": "BlockStored", "block_hashes": []any{1}, "token_ids": []any{1}, "block_size": 1, "lora_name": name}}})
	}
	for _, tc := range []struct {
		name    string
		payload []byte
		want    string
		refused bool
	}{
		{"none", storedWithLoRA(mp(nil)), "", false},
		{"short", storedWithLoRA(mp("sql-lora")), "sql-lora", false},
		{"MaxLoRANameBytes", storedWithLoRA(mp(long)), long, false},
		{"past MaxLoRANameBytes", storedWithLoRA(mp(long + "l")), "", true},
		{"1 MiB", storedWithLoRA(mp(strings.Repeat("l", 1<<20))), "", true},
		{"map form, MaxLoRANameBytes", mapForm(long), long, false},
		{"map form, past MaxLoRANameBytes", mapForm(long + "l"), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := kvevents.DecodeBatch(tc.payload)
			if tc.refused {
				require.ErrorIs(t, err, kvevents.ErrMalformed)
				require.ErrorContains(t, err, "lora_name: ")
				require.ErrorContains(t, err, "at most 1024")
				return
			}
			require.NoError(t, err)
			require.Len(t, b.Events, 1)
			require.Equal(t, tc.want, b.Events[0].LoRAName)
		})
	}
}

// A Decoder keeps the strings it interns across payloads; long ones (an unknown map key,
// which every event of a hostile peer may make distinct) are not kept, so decoding many
// payloads leaves the decoder holding little memory.
//
// What is counted is the copies a keeper would need: the payloads are the caller's (a
// transport reuses its buffer), so a decoder that kept a payload's 64 KiB key made a copy
// of it, an allocation over 32 KiB (the last bucket of runtime/metrics' allocs-by-size).
// n decodes of n distinct keys by such a decoder make at least n; the test fails at n/4,
// the share of the keys the heap-growth bound it replaces let the decoder keep. Other
// goroutines would have to make n/4 allocations that large meanwhile to fail it, where
// the heap growth across two GCs moved with whatever the rest of the process held.
func TestDecoderKeepsNoLongStrings(t *testing.T) {
	const n, keyBytes = 64, 64 << 10
	payloads := make([][]byte, n)
	for i := range payloads {
		key := strings.Repeat(string(rune('a'+i%26)), keyBytes-1) + string(rune('0'+i/26))
		p, err := msgpack.Marshal(map[string]any{"ts": 1.0, "events": []any{map[string]any{"type": "AllBlocksCleared", key: 0}}})
		require.NoError(t, err)
		payloads[i] = p
	}
	var d kvevents.Decoder
	var b kvevents.Batch
	require.NoError(t, d.Decode(payloads[0], &b)) // warm: the msgpack decoder, the Batch
	before := largeAllocs()
	for _, p := range payloads {
		if err := d.Decode(p, &b); err != nil {
			t.Fatal(err) // outside require: nothing but the decoder allocates in the loop
		}
	}
	large := largeAllocs() - before
	t.Logf("%d decodes of distinct %d-byte keys: %d allocations over 32 KiB", n, keyBytes, large)
	require.Less(t, large, uint64(n/4), "%d allocations over 32 KiB in %d decodes: the decoder copies the keys it could keep", large, n)
}

// A string the decoder refuses for its length (a lora_name, a medium) or skips (a map
// key it does not know) costs no copy: the declared length is checked before any byte is
// read, so a peer's megabyte strings make the decoder allocate nothing sized by them.
//
// What is counted is what the claim is about: heap allocations larger than 32 KiB (the
// last bucket of runtime/metrics' allocs-by-size), over runs decodes of the payload. A
// decoder that copied the string would make at least one such allocation a decode, so at
// least runs of them; the test fails at runs. Other goroutines of the process would have
// to make runs allocations that large meanwhile to fail it, where a bound on the bytes
// allocated (TotalAlloc) was crossed by any 64 KiB of background allocation.
func TestDecodeCopiesNoLongString(t *testing.T) {
	mp := func(v any) []byte { b, err := msgpack.Marshal(v); require.NoError(t, err); return b }
	const long, runs = 1 << 20, 8
	huge := strings.Repeat("x", long)
	event := func(k string, v any) []byte {
		return mp(map[string]any{"ts": 1.0, "events": []any{map[string]any{"type": "AllBlocksCleared", k: v}}})
	}
	for _, tc := range []struct {
		name    string
		payload []byte
		refused string
	}{
		{"lora_name, array form", storedWithLoRA(mp(huge)), "lora_name: "},
		{"lora_name, map form", mp(map[string]any{"ts": 1.0, "events": []any{map[string]any{
			"type": "BlockStored", "block_hashes": []any{1}, "token_ids": []any{1}, "block_size": 1, "lora_name": huge}}}), "lora_name: "},
		{"medium, map form", event("medium", huge), "medium: "},
		{"unknown event key", event(huge, 0), ""},
		{"unknown batch key", mp(map[string]any{"ts": 1.0, "events": []any{}, huge: 0}), ""},
		{"extra_keys salt", mp(map[string]any{"ts": 1.0, "events": []any{map[string]any{
			"type": "BlockStored", "block_hashes": []any{1}, "token_ids": []any{1}, "block_size": 1,
			"extra_keys": []any{[]any{huge}}}}}), "extra_keys: extra key: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d kvevents.Decoder
			var b kvevents.Batch
			require.NoError(t, d.Decode(event("k", 0), &b)) // warm: the msgpack decoder, the Batch
			before := largeAllocs()
			for range runs {
				err := d.Decode(tc.payload, &b)
				if tc.refused != "" {
					require.ErrorIs(t, err, kvevents.ErrMalformed)
					require.ErrorContains(t, err, tc.refused)
				} else {
					require.NoError(t, err)
				}
			}
			large := largeAllocs() - before
			t.Logf("%d decodes of a %d-byte string: %d allocations over 32 KiB", runs, long, large)
			require.Less(t, large, uint64(runs), "decoding a %d-byte string allocates something as large", long)
		})
	}
}

// largeAllocs is the number of heap allocations over 32 KiB (the largest size class) the
// process has made: the last bucket of /gc/heap/allocs-by-size:bytes.
func largeAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs-by-size:bytes"}}
	metrics.Read(s)
	h := s[0].Value.Float64Histogram()
	var n uint64
	for i, c := range h.Counts {
		if h.Buckets[i] >= 32<<10 {
			n += c
		}
	}
	return n
}
