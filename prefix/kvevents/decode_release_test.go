package kvevents_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvpage/kvpage/prefix/kvevents"
)

// A Decoder keeps no reference to a payload once Decode returns, whether it decoded or
// refused it (before, it held the last payload until the next Decode), and nothing a
// Batch holds aliases the payload: overwriting it after Decode changes none of the
// decoded events. The payloads cover hashes as byte strings and integers, names, extra
// keys of strings and of a bin, the map form, and a refused batch.
func TestDecoderReleasesThePayload(t *testing.T) {
	mapForm, err := msgpack.Marshal([]any{2.5, []any{
		map[string]any{"type": "BlockStored", "block_hashes": []any{unhex(t, plain0)}, "parent_block_hash": unhex(t, plain1),
			"token_ids": seqTokens(0, 16), "block_size": 16, "lora_id": 3, "medium": "CPU", "lora_name": "lora-x",
			"extra_keys": []any{[]any{"img", []byte{1, 2, 3}, 7}}},
	}, 1})
	require.NoError(t, err)
	for _, c := range []struct {
		name    string
		payload []byte
		ok      bool
	}{
		{"array form, byte hashes", unhex(t, goldenBatch), true},
		{"array form, integer hashes", unhex(t, goldenIntBatch), true},
		{"map form, a bin extra key", mapForm, true},
		{"trailing bytes", append(unhex(t, goldenBatch), 0xc0), false},
		{"truncated", unhex(t, goldenBatch)[:40], false},
	} {
		var d kvevents.Decoder
		var b kvevents.Batch
		err := d.Decode(c.payload, &b)
		require.Equal(t, c.ok, err == nil, "%s: %v", c.name, err)
		require.Zero(t, kvevents.DecoderHeldBytes(&d), "%s: the decoder let go of the payload", c.name)
		if !c.ok {
			continue
		}
		want, err := kvevents.DecodeBatch(append([]byte(nil), c.payload...))
		require.NoError(t, err)
		for i := range c.payload {
			c.payload[i] = 0xff
		}
		require.Equal(t, *want, b, "%s: the batch does not alias the payload", c.name)
	}
}
