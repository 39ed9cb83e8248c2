package kvevents_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// Every string of extra_keys, at any depth, is bounded by MaxExtraKeyBytes, from its
// declared length: a string, a bin, an identifier in an [identifier, offset] pair.
func TestDecodeBoundsExtraKeys(t *testing.T) {
	mp := func(v any) []byte { b, err := msgpack.Marshal(v); require.NoError(t, err); return b }
	long := strings.Repeat("k", kvevents.MaxExtraKeyBytes)
	stored := func(keys any) []byte {
		return mp(map[string]any{"ts": 1.0, "events": []any{map[string]any{
			"type": "BlockStored", "block_hashes": []any{1}, "token_ids": []any{1}, "block_size": 1,
			"extra_keys": []any{keys}}}})
	}
	for _, tc := range []struct {
		name    string
		keys    []any
		refused bool
	}{
		{"salt of MaxExtraKeyBytes", []any{"lora", long}, false},
		{"salt past MaxExtraKeyBytes", []any{"lora", long + "k"}, true},
		{"identifier past MaxExtraKeyBytes", []any{long + "k", "salt"}, true},
		{"bin of MaxExtraKeyBytes", []any{[]byte(long)}, false},
		{"bin past MaxExtraKeyBytes", []any{[]byte(long + "k")}, true},
		{"pair's identifier of MaxExtraKeyBytes", []any{[]any{long, 7}}, false},
		{"pair's identifier past MaxExtraKeyBytes", []any{[]any{long + "k", 7}}, true},
		{"1 MiB salt", []any{strings.Repeat("s", 1<<20)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := kvevents.DecodeBatch(stored(tc.keys))
			if tc.refused {
				require.ErrorIs(t, err, kvevents.ErrMalformed)
				require.ErrorContains(t, err, "extra_keys: extra key: ")
				require.ErrorContains(t, err, "at most 4096")
				return
			}
			require.NoError(t, err)
			require.Len(t, b.Events, 1)
			require.Len(t, b.Events[0].ExtraKeys, 1)
			require.Len(t, b.Events[0].ExtraKeys[0], len(tc.keys))
		})
	}
}

// A writer leaves out (and counts) a BlockStored whose extra_keys would hold a string a
// Decoder refuses, unless WithoutExtraKeys leaves extra_keys off the wire; a salt goes on
// a chain's first block only, so a long one on a chain with a parent is not written.
func TestWriterBoundsExtraKeys(t *testing.T) {
	long := strings.Repeat("k", kvevents.MaxExtraKeyBytes)
	stored := func(salt string, mm []string, parent bool) *prefix.BlockStored {
		e := &prefix.BlockStored{HashSize: 32, BlockSize: 1, Hashes: make([]byte, 32), Blocks: make([]blocks.ID, 1),
			Tokens: []int32{7}, Namespace: prefix.Namespace{Salt: salt}}
		if mm != nil {
			e.MM = [][]string{mm}
		}
		if parent {
			e.Parent = make([]byte, 32)
		}
		return e
	}
	for _, tc := range []struct {
		name    string
		e       *prefix.BlockStored
		opts    []kvevents.Option
		refused bool
	}{
		{"salt of MaxExtraKeyBytes", stored(long, nil, false), nil, false},
		{"salt past MaxExtraKeyBytes", stored(long+"k", nil, false), nil, true},
		{"salt past MaxExtraKeyBytes, not written under a parent", stored(long+"k", nil, true), nil, false},
		{"salt past MaxExtraKeyBytes, WithoutExtraKeys", stored(long+"k", nil, false), []kvevents.Option{kvevents.WithoutExtraKeys()}, false},
		{"identifier of MaxExtraKeyBytes", stored("", []string{"img", long}, false), nil, false},
		{"identifier past MaxExtraKeyBytes", stored("", []string{"img", long + "k"}, false), nil, true},
	} {
		check := func(t *testing.T, payload []byte) {
			b, err := kvevents.DecodeBatch(payload)
			require.NoError(t, err)
			if tc.refused {
				require.Len(t, b.Events, 1)
				return
			}
			require.Len(t, b.Events, 2)
		}
		refused := uint64(0)
		if tc.refused {
			refused = 1
		}
		emit := func(o prefix.Observer) { o.AllBlocksCleared(); o.BlockStored(tc.e) }
		t.Run(tc.name+"/Batcher", func(t *testing.T) {
			b := newBatcher(t, tc.opts...)
			emit(b)
			require.Equal(t, refused, b.Refused())
			check(t, b.AppendBatch(nil, 1))
		})
		t.Run(tc.name+"/Recorder", func(t *testing.T) {
			sink := payloadSink(make(chan []byte, 1))
			r, err := kvevents.NewRecorder(sink, tc.opts...)
			require.NoError(t, err)
			emit(r)
			r.Flush()
			r.Close()
			require.Equal(t, refused, r.Stats().RefusedEvents)
			check(t, <-sink)
		})
	}
}
