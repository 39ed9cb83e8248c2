package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A server reuses its per-step buffers, Request.MM's included. Admit used to keep the
// caller's slice, so a write to it after Admit changed the keys of the sequence's blocks
// still to be committed: the chunked prefill's rest below was cached under the caller's
// new image, and a later request with the sequence's own image missed it.
func TestAdmitOwnsTheCallersInputs(t *testing.T) {
	s := newStack(t, 16, 4, Config{})
	toks := seqOf(16, 100)
	imgA := []prefix.MMInput{{Hash: "img-a", Offset: 8, Length: 8}}
	mm := append([]prefix.MMInput(nil), imgA...)
	_, err := s.m.Admit(1, &Request{Prompt: toks, MM: mm, Prefill: 4}) // block 0 now, the rest by Append
	require.NoError(t, err)
	mm[0] = prefix.MMInput{Hash: "img-b", Offset: 8, Length: 8} // the caller's buffer, reused

	in, err := s.m.AppendInputs(nil, 1)
	require.NoError(t, err)
	require.Equal(t, imgA, in, "the sequence keeps the inputs it was admitted with")
	_, err = s.m.Append(1, toks[4:], 0)
	require.NoError(t, err)
	hits, _ := s.idx.Peek(nil, &prefix.Prompt{Tokens: toks, MM: imgA}, prefix.WholePrompt)
	require.Len(t, hits, 4, "the rest is cached under the admitted image")
	hits, _ = s.idx.Peek(nil, &prefix.Prompt{Tokens: toks, MM: mm}, prefix.WholePrompt)
	require.Len(t, hits, 2, "the caller's later image keys nothing past the text")
	s.done(t)
}

// A sequence's inputs live in its record's buffer, which a finished record takes back
// for the next admission. A fork and a resumed sequence get their own copies: sharing the
// parent's (or the swapped record's) buffer, they would take the next admission's inputs
// as their own once that record is reused.
func TestInputsSurviveRecordReuse(t *testing.T) {
	toks := seqOf(16, 100)
	imgA := []prefix.MMInput{{Hash: "img-a", Offset: 8, Length: 8}}
	imgB := []prefix.MMInput{{Hash: "img-b", Offset: 8, Length: 8}}
	check := func(t *testing.T, s *stack, id SeqID) {
		t.Helper()
		// An admission that takes the spare record, with inputs as long as imgA.
		_, err := s.m.Admit(9, &Request{Prompt: seqOf(16, 500), MM: imgB})
		require.NoError(t, err)
		in, err := s.m.AppendInputs(nil, id)
		require.NoError(t, err)
		require.Equal(t, imgA, in)
		require.NoError(t, s.m.Abort(9))
	}
	t.Run("fork", func(t *testing.T) {
		s := newStack(t, 16, 4, Config{})
		_, err := s.m.Admit(1, &Request{Prompt: toks, MM: imgA, Prefill: 4})
		require.NoError(t, err)
		require.NoError(t, s.m.Fork(1, 2))
		require.NoError(t, s.m.Finish(1)) // its record is spare now
		check(t, s, 2)
		_, err = s.m.Append(2, toks[4:], 0)
		require.NoError(t, err)
		hits, _ := s.idx.Peek(nil, &prefix.Prompt{Tokens: toks, MM: imgA}, prefix.WholePrompt)
		require.Len(t, hits, 4, "the fork's blocks are keyed by its own image")
		s.done(t)
	})
	t.Run("resume", func(t *testing.T) {
		s := newSwapStack(t, 12, 8, nil, false)
		_, err := s.m.Admit(1, &Request{Prompt: toks[:13], MM: []prefix.MMInput{{Hash: "img-a", Offset: 8, Length: 8}}})
		require.ErrorIs(t, err, ErrInvalidArgument, "an input past the prompt is refused")
		_, err = s.m.Admit(1, &Request{Prompt: toks, MM: imgA})
		require.NoError(t, err)
		_, err = s.m.PreemptSeq(1, Swap)
		require.NoError(t, err)
		s.completeAll(t, true)
		_, err = s.m.Resume(1) // the swapped record is spare now
		require.NoError(t, err)
		s.completeAll(t, true)
		check(t, s, 1)
		s.done(t)
	})
}

// Admitting and finishing text requests allocates nothing in steady state (there are no
// inputs to copy), and a multimodal request reuses its record's buffer: its inputs are
// copied, not allocated, once a record has held as many.
func TestAdmitCopiesInputsWithoutAllocating(t *testing.T) {
	if invariant.Enabled {
		t.Skip("invariant checks allocate")
	}
	for _, tc := range []struct {
		name string
		mm   []prefix.MMInput
	}{
		{"text", nil},
		{"multimodal", []prefix.MMInput{{Hash: "img-a", Offset: 4, Length: 8}, {Hash: "img-b", Offset: 20, Length: 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, 64, 4, Config{})
			req := &Request{Prompt: seqOf(30, 100), MM: tc.mm, MaxTokens: 40}
			seq := SeqID(1)
			cycle := func() {
				if _, err := s.m.Admit(seq, req); err != nil {
					panic(err)
				}
				if err := s.m.Finish(seq); err != nil {
					panic(err)
				}
				seq++
			}
			cycle()
			require.Zero(t, testing.AllocsPerRun(500, cycle), "an admission allocates nothing in steady state")
			s.done(t)
		})
	}
}
