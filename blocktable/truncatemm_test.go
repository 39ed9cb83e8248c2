package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// Truncate cuts the multimodal inputs with the tokens: an input that starts at or past the
// cut is dropped and one across it ends at the cut. So a block appended after the cut
// takes the key of the inputs as cut (Inputs): the plain-text key where no input reaches
// it (before 4daa6a2, the old inputs keyed the re-appended blocks over their span). The
// blocks before the cut keep their keys. In the block a cut falls in mid-way, the cut
// input is renamed: re-appending its own placeholder tokens there (as text) made the
// block a duplicate of the whole image's, so that a later prompt with the image cut there
// hit image KV where the sequence has text.
func TestTruncateCutsMultimodalInputs(t *testing.T) {
	img := func(hash string, off, n int) prefix.MMInput {
		return prefix.MMInput{Hash: hash, Offset: off, Length: n}
	}
	for _, tc := range []struct {
		name     string
		mm       []prefix.MMInput
		cut      int
		asCut    []prefix.MMInput // the inputs as cut: what Inputs returns
		reappend int              // tokens appended again: through the end of block 2
		newKey   bool             // block 2's key changes: the cut removed every input token in it
	}{
		{"past the cut", []prefix.MMInput{img("a", 8, 4)}, 8, nil, 4, true},
		{"at the cut, a block later", []prefix.MMInput{img("a", 2, 2), img("b", 9, 3)}, 9, []prefix.MMInput{img("a", 2, 2)}, 3, true},
		{"across the cut", []prefix.MMInput{img("a", 6, 4), img("b", 10, 2)}, 8, []prefix.MMInput{img("a", 6, 2)}, 4, true},
		// Token 8, kept, is still the image's, token 9 on are text: the image's part in
		// block 2 is renamed, and block 2 is no duplicate of the whole image's.
		{"across the cut, mid-block", []prefix.MMInput{img("a", 6, 4)}, 9, []prefix.MMInput{img("a", 6, 2), img("a\x00cut3", 8, 1)}, 3, true},
		{"inside the cut's block", []prefix.MMInput{img("a", 9, 3)}, 10, []prefix.MMInput{img("a\x00cut1", 9, 1)}, 2, true},
		{"inside the tokens kept", []prefix.MMInput{img("a", 1, 2)}, 8, []prefix.MMInput{img("a", 1, 2)}, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, 16, 4, Config{})
			toks := seqOf(12, 100)
			mm := append([]prefix.MMInput(nil), tc.mm...)
			_, err := s.m.Admit(1, &Request{Prompt: toks, MM: mm, MaxTokens: 16})
			require.NoError(t, err)
			require.NoError(t, s.m.Truncate(1, tc.cut))
			require.Equal(t, tc.mm, mm, "the caller's inputs are not changed")
			in, err := s.m.AppendInputs(nil, 1)
			require.NoError(t, err)
			require.Equal(t, tc.asCut, in)
			_, err = s.m.Append(1, toks[tc.cut:tc.cut+tc.reappend], 0)
			require.NoError(t, err)
			require.Equal(t, toks, mustTokens(t, s.m, 1))
			table, err := s.m.Blocks(1)
			require.NoError(t, err)

			// Block 2 (tokens 8-11), committed after the cut, is found under the inputs as
			// cut. Where the cut changed them, it is cached under its own key beside the
			// block 2 that Admit cached with the old inputs, not as a duplicate of it.
			hits, _ := s.idx.Peek(nil, &prefix.Prompt{Tokens: toks, MM: tc.asCut}, prefix.WholePrompt)
			require.Len(t, hits, 3, "the re-appended block has the key of a prompt without what was cut")
			require.Equal(t, table[:2], hits[:2], "the blocks before the cut keep their keys")
			if tc.newKey {
				require.Equal(t, table[2], hits[2], "cached under the key as cut")
				old, _ := s.idx.Peek(nil, &prefix.Prompt{Tokens: toks, MM: tc.mm}, prefix.WholePrompt)
				require.Len(t, old, 3, "Admit's block 2, under the old inputs' key")
				require.NotEqual(t, old[2], hits[2], "the old inputs key no block appended after the cut")
			}
			require.NoError(t, s.m.CheckInvariants())
			s.done(t)
		})
	}
}

func mustTokens(t *testing.T, m *Manager, id SeqID) []int32 {
	t.Helper()
	toks, err := m.Tokens(id)
	require.NoError(t, err)
	return toks
}
