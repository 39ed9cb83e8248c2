package kvevents_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// One Recorder observing indexes of both multimodal key forms (an Observer may be shared)
// replays each event's keys in its own form: the offsets of a pair-form event are not
// read from where an earlier identifier-form event's keys were.
func TestRecorderMixedMMForms(t *testing.T) {
	sink := &collectSink{}
	rec, err := kvevents.NewRecorder(sink, kvevents.WithTimestamps(func() float64 { return 1 }))
	require.NoError(t, err)
	stored := func(mm [][]string, offs [][]int) *prefix.BlockStored {
		return &prefix.BlockStored{HashSize: 32, Hashes: make([]byte, 32), Blocks: []blocks.ID{0}, BlockSize: 1,
			Tokens: []int32{1}, MM: mm, MMOffsets: offs}
	}
	rec.BlockStored(stored([][]string{{"a", "b"}}, nil))
	rec.BlockStored(stored([][]string{{"c"}}, [][]int{{-4}}))
	rec.Flush()
	require.NoError(t, rec.Close())
	require.Len(t, sink.payloads, 1)
	b, err := kvevents.DecodeBatch(sink.payloads[0])
	require.NoError(t, err)
	require.Len(t, b.Events, 2)
	require.Equal(t, [][]any{{"a", "b"}}, b.Events[0].ExtraKeys)
	require.Equal(t, [][]any{{[]any{"c", int8(-4)}}}, b.Events[1].ExtraKeys)
}
