package kvevents_test

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvpage/kvpage/prefix/kvevents"
)

// storedWith is a one-event array-form batch: a BlockStored of one integer hash whose
// medium, extra_keys and group_idx are the raw msgpack given.
func storedWith(medium, extraKeys, group []byte) []byte {
	b := append(batchHead(1), 0x9a) // 10 elements
	b = appendStr(b, "BlockStored")
	b = append(b, 0x91, 0x01, 0xc0, 0x91, 0x01, 0x01, 0xc0) // hashes, parent, tokens, size, lora_id
	b = append(append(b, medium...), 0xc0)                  // medium, lora_name
	b = append(append(b, extraKeys...), group...)
	return append(b, 0xc0) // rank
}

// The new fields from the wire: a pair nested past the depth limit, a pair declaring more
// elements than the payload holds and a group_idx that is no integer in [0, MaxGroup] are
// refused with ErrMalformed, as is a medium past MaxMediumBytes; a pair's offset of any
// width, and a short medium no vLLM tier names, are accepted as they are.
func TestDecodeHostileNewFields(t *testing.T) {
	mp := func(v any) []byte { b, err := msgpack.Marshal(v); require.NoError(t, err); return b }
	gpu, group0 := mp("GPU"), mp(0)
	deep := append(append([]byte{0x91, 0x91, 0x92}, appendStr(nil, "img")...), bytes.Repeat([]byte{0x91}, 1<<12)...)
	deep = append(deep, 0x00)
	for _, tc := range []struct {
		name                     string
		medium, extraKeys, group []byte
		refused                  string // "" when accepted
	}{
		{"deep pair", gpu, deep, group0, "nested too deeply"},
		{"pair of 2^32-1 elements", gpu, []byte{0x91, 0x91, 0xdd, 0xff, 0xff, 0xff, 0xff}, group0, "bytes"},
		{"group_idx a string", gpu, mp(nil), mp("0"), "group_idx"},
		{"group_idx -1", gpu, mp(nil), mp(-1), "out of"},
		{"group_idx past MaxGroup", gpu, mp(nil), mp(kvevents.MaxGroup + 1), "out of"},
		{"group_idx 2^64-1", gpu, mp(nil), mp(uint64(math.MaxUint64)), "group_idx"},
		{"group_idx MaxGroup", gpu, mp(nil), mp(kvevents.MaxGroup), ""},
		{"offset int64 min", gpu, mp([]any{[]any{[]any{"img", int64(math.MinInt64)}}}), group0, ""},
		{"offset uint64 max", gpu, mp([]any{[]any{[]any{"img", uint64(math.MaxUint64)}}}), group0, ""},
		{"medium TAPE", mp("TAPE"), mp(nil), group0, ""},
		{"medium of MaxMediumBytes", mp(strings.Repeat("m", kvevents.MaxMediumBytes)), mp(nil), group0, ""},
		{"medium past MaxMediumBytes", mp(strings.Repeat("m", kvevents.MaxMediumBytes+1)), mp(nil), group0, "medium: 65 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := kvevents.DecodeBatch(storedWith(tc.medium, tc.extraKeys, tc.group))
			if tc.refused != "" {
				require.ErrorIs(t, err, kvevents.ErrMalformed)
				require.ErrorContains(t, err, tc.refused)
				return
			}
			require.NoError(t, err)
			require.Len(t, b.Events, 1)
			require.True(t, b.Events[0].HasGroup)
			var medium string
			require.NoError(t, msgpack.Unmarshal(tc.medium, &medium))
			require.Equal(t, medium, b.Events[0].Medium)
		})
	}
}
