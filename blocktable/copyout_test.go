package blocktable

import (
	"slices"
	"testing"

	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// AppendInputs and AppendTokens hand out copies: a caller that changes what it got (an
// input's hash or offset, a token) changes neither the sequence's keys nor its tokens,
// so the blocks it commits next are found under the inputs it was admitted with. Tokens,
// the Manager's own slice, is clipped: an append to it does not write into the room the
// sequence's next tokens take.
func TestCopiesOutOfTheManager(t *testing.T) {
	s := newStack(t, 16, 4, Config{})
	toks := seqOf(12, 100)
	mm := []prefix.MMInput{{Hash: "img", Offset: 4, Length: 6}}
	_, err := s.m.Admit(1, &Request{Prompt: toks, MM: mm, Prefill: 6, MaxTokens: 16}) // a chunked prefill: 6 tokens in
	require.NoError(t, err)

	in, err := s.m.AppendInputs(nil, 1)
	require.NoError(t, err)
	require.Equal(t, mm, in)
	in[0].Hash, in[0].Offset = "other", 0 // the caller's copy
	got, err := s.m.AppendTokens(make([]int32, 0, 16), 1)
	require.NoError(t, err)
	require.Equal(t, toks[:6], got)
	got[5] = -1
	view, err := s.m.Tokens(1)
	require.NoError(t, err)
	require.Equal(t, len(view), cap(view), "clipped")
	_ = append(view, -2, -3) // must copy: it would otherwise write where tokens 6 and 7 go

	_, err = s.m.Append(1, toks[6:], 0)
	require.NoError(t, err)
	require.Equal(t, toks, mustTokens(t, s.m, 1))
	again, err := s.m.AppendInputs(nil, 1)
	require.NoError(t, err)
	require.Equal(t, mm, again, "the sequence's inputs are unchanged")
	hits, _ := s.idx.Peek(nil, &prefix.Prompt{Tokens: toks, MM: mm}, prefix.WholePrompt)
	require.Len(t, hits, 3, "every block is keyed by the admitted image")

	// A buffer with room: no allocation.
	if !invariant.Enabled {
		inBuf, tokBuf := make([]prefix.MMInput, 0, 4), make([]int32, 0, 16)
		require.Zero(t, testing.AllocsPerRun(100, func() {
			inBuf, _ = s.m.AppendInputs(inBuf[:0], 1)
			tokBuf, _ = s.m.AppendTokens(tokBuf[:0], 1)
		}))
		require.True(t, slices.Equal(toks, tokBuf))
	}
	// An unknown sequence: dst back unchanged.
	dst := []int32{7}
	out, err := s.m.AppendTokens(dst, 9)
	require.ErrorIs(t, err, ErrUnknownSeq)
	require.Equal(t, dst, out)
	s.done(t)
}
