package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A Truncate into a multimodal input left the input past the sequence's tokens, and a
// Resume of it after a swap passed it on to Admit, which refused it (ErrInvalidArgument)
// every time: the sequence could only be aborted. Truncate now cuts the input to the
// tokens itself (truncatemm_test.go); the blocks the input still covers keep their keys,
// so they are found again.
func TestResumeAfterTruncateIntoAnImage(t *testing.T) {
	s := newSwapStack(t, 12, 8, nil, false)
	mm := []prefix.MMInput{{Hash: "img", Offset: 8, Length: 8}, {Hash: "img2", Offset: 16, Length: 1}}
	_, err := s.m.Admit(1, &Request{Prompt: prompt(10, 17), MM: mm})
	require.NoError(t, err)
	require.NoError(t, s.m.Truncate(1, 13)) // into the first image; the second is gone
	_, err = s.m.PreemptSeq(1, Swap)
	require.NoError(t, err)
	s.completeAll(t, true)
	res, err := s.m.Resume(1)
	require.NoError(t, err)
	require.Equal(t, 12, res.HitTokens+res.LoadTokens, "its 3 full blocks, the image's first one included, are found again")
	require.Equal(t, 13, res.Tokens)
	require.Equal(t, 8, mm[0].Length, "the caller's inputs are not changed")
	s.completeAll(t, true)
	s.done(t)
}
