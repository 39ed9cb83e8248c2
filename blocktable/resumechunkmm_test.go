package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A chunked prefill swapped out before its image was all computed, resumed, and then
// given the rest of its prompt keys the blocks after the resume as the image's, as vLLM
// keys a request's blocks by all of its inputs (mm hash and offset,
// generate_block_hash_extra_keys) whatever part of it is computed: the server computes
// image KV for them. Resume used to give the resumed sequence the inputs cut to its
// tokens, so those blocks were keyed as text, and the block the cut fell in by the cut
// input's renamed part. Then a later request with the same image missed them, and a
// request whose tokens past the cut are text (a sequence truncated there, the image's
// placeholders appended again as text) hit image KV.
func TestResumeKeepsAChunkedPrefillsInputs(t *testing.T) {
	s := newSwapStack(t, 16, 16, nil, false)
	full := prompt(10, 24) // 6 blocks of 4
	mm := []prefix.MMInput{{Hash: "img", Offset: 4, Length: 16}}
	_, err := s.m.Admit(1, &Request{Prompt: full, MM: mm, Prefill: 10, MaxTokens: 32})
	require.NoError(t, err)
	_, err = s.m.PreemptSeq(1, Swap) // 10 tokens in: the image's first 6 of 16
	require.NoError(t, err)
	s.completeAll(t, true)
	_, err = s.m.Resume(1)
	require.NoError(t, err)
	s.completeAll(t, true)
	in, err := s.m.AppendInputs(nil, 1)
	require.NoError(t, err)
	require.Equal(t, mm, in, "the resumed sequence keeps its prompt's inputs")
	_, err = s.m.Append(1, full[10:], 0) // the rest of the prefill: the image's other 10
	require.NoError(t, err)
	require.NoError(t, s.m.Finish(1))

	res, err := s.m.CanAdmit(2, &Request{Prompt: full, MM: mm})
	require.NoError(t, err)
	require.Equal(t, 20, res.HitTokens, "the same image finds every block but the last (held back)")
	// What a sequence truncated at 10 and then given the same tokens as text keys: its
	// block [8, 12) holds text past 10, the blocks after it text only.
	res, err = s.m.CanAdmit(3, &Request{Prompt: full, MM: mmUpTo(mm, 10, 4)})
	require.NoError(t, err)
	require.Equal(t, 8, res.HitTokens, "text past the cut never hits the image's KV")
	res, err = s.m.CanAdmit(4, &Request{Prompt: full})
	require.NoError(t, err)
	require.Equal(t, 4, res.HitTokens, "a text prompt finds the text block only")
	s.done(t)
}
