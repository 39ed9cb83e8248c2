package prefix

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
)

// placeholders returns n copies of an image placeholder token.
func placeholders(n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = 9
	}
	return t
}

// Two prompts of identical placeholder tokens whose images "B" and "A" split differently:
// B covers [0, 5) then A [5, 12) in the first, B [0, 6) then A [6, 12) in the second. The
// blocks after the first carry the same identifiers in both, so the identifier form
// (vLLM before March 2026) matches the second prompt's whole prompt against the first's
// blocks; with offsets (vLLM since) only block 0, where both have (B, 0), is the same.
func TestMMKeyFormDecidesEquality(t *testing.T) {
	stored := Prompt{Tokens: placeholders(3 * testBS), MM: []MMInput{{Hash: "B", Offset: 0, Length: 5}, {Hash: "A", Offset: 5, Length: 7}}}
	other := Prompt{Tokens: placeholders(3 * testBS), MM: []MMInput{{Hash: "B", Offset: 0, Length: 6}, {Hash: "A", Offset: 6, Length: 6}}}
	for _, tc := range []struct {
		form      MMKeyForm
		otherHit  int
		storedHit int
	}{
		{MMKeyIdentifier, 3, 3},
		{MMKeyIdentifierOffset, 1, 3},
	} {
		t.Run(tc.form.String(), func(t *testing.T) {
			pool, x := newTestIndex(t, 16, WithMMKeyForm(tc.form))
			admit(t, x, pool, stored).finish(t, x)
			got, _ := x.Peek(nil, &other, WholePrompt)
			assert.Len(t, got, tc.otherHit, "the other split")
			got, _ = x.Peek(nil, &stored, WholePrompt)
			assert.Len(t, got, tc.storedHit, "the same prompt again")
			// The other prompt's blocks are then cached beside the first's where they differ.
			r := admit(t, x, pool, other)
			assert.Equal(t, min(tc.otherHit, 2), r.hit, "admit leaves the last token out")
			r.finish(t, x)
			require.NoError(t, x.CheckInvariants())
		})
	}
}

// Events and Hash carry the offsets in the pair form and none in the identifier form, and
// the pair form's hashes differ from the identifier form's only where a block has
// multimodal keys, with either of the package's hashers.
func TestMMKeyFormEvents(t *testing.T) {
	p := Prompt{Namespace: Namespace{LoRA: "ad", Salt: "t1"}, Tokens: toks(1, 3*testBS),
		MM: []MMInput{{Hash: "img", Offset: testBS + 2, Length: 3}}}
	for _, h := range []Hasher{Fast64{}, NewSHA256()} {
		hashes := map[MMKeyForm][][]byte{}
		for _, tc := range []struct {
			form  MMKeyForm
			extra []Extra // what the hasher must see per block
			offs  [][]int
		}{
			{MMKeyIdentifier, []Extra{{LoRA: "ad", Salt: "t1"}, {LoRA: "ad", MM: []string{"img"}}, {LoRA: "ad", MM: []string{"img"}}}, nil},
			{MMKeyIdentifierOffset, []Extra{{LoRA: "ad", Salt: "t1"}, {LoRA: "ad", MM: []string{"img"}, MMOffsets: []int{2}},
				{LoRA: "ad", MM: []string{"img"}, MMOffsets: []int{-2}}}, [][]int{nil, {2}, {-2}}},
		} {
			t.Run(h.Name()+"/"+tc.form.String(), func(t *testing.T) {
				log := &eventLog{}
				pool, x := newTestIndex(t, 16, WithHasher(h), WithMMKeyForm(tc.form), WithObserver(log))
				r := admit(t, x, pool, p)
				require.Len(t, log.events, 1)
				var want [][]byte
				parent := make([]byte, h.Size())
				h.Root(parent)
				for b, e := range tc.extra {
					dst := make([]byte, h.Size())
					h.Block(dst, parent, p.Tokens[b*testBS:(b+1)*testBS], e)
					want, parent = append(want, dst), dst
					got, ok := x.Hash(nil, r.ids[b])
					require.True(t, ok)
					assert.Equal(t, dst, got, "Hash of block %d", b)
				}
				ev := log.events[0].(storedCopy)
				assert.Equal(t, want, ev.hashes)
				assert.Equal(t, [][]string{nil, {"img"}, {"img"}}, ev.mm)
				assert.Equal(t, tc.offs, ev.offs)
				hashes[tc.form] = want
				r.finish(t, x)
			})
		}
		id, pairs := hashes[MMKeyIdentifier], hashes[MMKeyIdentifierOffset]
		require.Len(t, id, 3)
		require.Len(t, pairs, 3)
		assert.Equal(t, id[0], pairs[0], "a text block hashes alike in both forms")
		assert.NotEqual(t, id[1], pairs[1])
		assert.NotEqual(t, id[2], pairs[2])
	}
}

// The identifier form's hashes are the ones kvpage has always produced: pinned values
// computed before the pair form existed (commit 571a25f).
func TestMMKeyIdentifierFormUnchanged(t *testing.T) {
	p := Prompt{Namespace: Namespace{LoRA: "ad", Salt: "t1"}, Tokens: toks(1, 3*testBS),
		MM: []MMInput{{Hash: "img", Offset: testBS + 2, Length: 3}}}
	for _, tc := range []struct {
		name string
		opts []Option
		want []string
	}{
		{"fast64", nil, identifierFast64},
		{"sha256", []Option{WithHasher(NewSHA256())}, identifierSHA256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, x := newTestIndex(t, 16, tc.opts...)
			r := admit(t, x, pool, p)
			for b, want := range tc.want {
				got, ok := x.Hash(nil, r.ids[b])
				require.True(t, ok)
				assert.Equal(t, want, hex.EncodeToString(got), "block %d", b)
			}
			r.finish(t, x)
		})
	}
}

// Values of TestMMKeyIdentifierFormUnchanged, from the code before the pair form.
var (
	identifierFast64 = []string{"0b4b17b3a80d92d2", "a71716d8e9a30dce", "ac2741de7e4722a6"}
	identifierSHA256 = []string{
		"ff54e2b000d59fb659134bf7f825cdf136276b5d646083060333f004bff50742",
		"92d85b8b26d68d96f19ac7b01f3d393680268cf7245bb014ece7f01a62f07e09",
		"5b92cf2e94d744826b1b0814f6de8140abe130bf4b1c67d3caefcf82044c4d84",
	}
)

func TestNewRejectsUnknownMMKeyForm(t *testing.T) {
	pool, err := blocks.New(8)
	require.NoError(t, err)
	_, err = New(pool, testBS, WithMMKeyForm(MMKeyIdentifierOffset+1))
	require.True(t, errors.Is(err, ErrInvalidArgument), "%v", err)
	assert.Equal(t, "MMKeyForm(2)", (MMKeyIdentifierOffset + 1).String())
}

// Dump shows a block's offsets in the pair form, and what it always showed otherwise.
func TestDumpShowsMMOffsets(t *testing.T) {
	p := Prompt{Tokens: toks(1, 2*testBS), MM: []MMInput{{Hash: "img", Offset: 2, Length: 4}}}
	for _, tc := range []struct {
		form MMKeyForm
		want []string
		deny string
	}{
		{MMKeyIdentifier, []string{`mm=["img"]`}, "mmoff"},
		{MMKeyIdentifierOffset, []string{`mm=["img"] mmoff=[2]`, `mm=["img"] mmoff=[-2]`}, ""},
	} {
		t.Run(tc.form.String(), func(t *testing.T) {
			pool, x := newTestIndex(t, 8, WithMMKeyForm(tc.form))
			admit(t, x, pool, p).finish(t, x)
			var buf strings.Builder
			require.NoError(t, x.WriteState(&buf))
			d := buf.String()
			for _, w := range tc.want {
				assert.Contains(t, d, w)
			}
			if tc.deny != "" {
				assert.NotContains(t, d, tc.deny)
			}
		})
	}
}
