package blocktable

import (
	"github.com/kvpage/kvpage/blocks"
	"testing"

	"github.com/stretchr/testify/require"
)

// The index's lookup statistics count each admitted request once: a dry run (CanAdmit)
// and a refused admission count nothing.
func TestManagerLookupStatsCountAdmissionsOnce(t *testing.T) {
	s := newStack(t, 8, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(12, 1)}) // three cached blocks
	require.NoError(t, err)
	base := s.idx.Stats()

	req := &Request{Prompt: seqOf(17, 1)} // hits the three cached blocks, 12 tokens
	res, err := s.m.CanAdmit(2, req)
	require.NoError(t, err)
	require.Equal(t, 12, res.HitTokens)
	require.Equal(t, base, s.idx.Stats(), "CanAdmit is a dry run")

	big := &Request{Prompt: seqOf(32, 1000)} // needs 8 new blocks, 5 are free: refused
	_, err = s.m.Admit(3, big)
	require.ErrorIs(t, err, blocks.ErrOutOfBlocks)
	require.Equal(t, base, s.idx.Stats(), "a refused admission is not counted")

	_, err = s.m.Admit(2, req)
	require.NoError(t, err)
	got := s.idx.Stats()
	require.Equal(t, base.Lookups+1, got.Lookups)
	require.Equal(t, base.LookedUpTokens+17, got.LookedUpTokens)
	require.Equal(t, base.HitTokens+12, got.HitTokens)
	s.done(t)
}
