package prefix

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Tenants share the public system prompt and nothing after it, even identical tokens.
func TestSaltRegions(t *testing.T) {
	pool, x := newTestIndex(t, 33)
	sys := toks(1, 2*testBS) // public: two blocks
	private := toks(500, 2*testBS)
	ka, kb := SaltKey("tenant-a"), SaltKey("tenant-b")
	prompt := func(key string) Prompt {
		tk := cat(sys, private, toks(900, 1))
		return Prompt{Tokens: tk, MM: SaltRegion(nil, len(sys), key)}
	}
	a := admit(t, x, pool, prompt(ka))
	a.finish(t, x)
	require.Equal(t, 4, x.Stats().Cached)

	pb := prompt(kb)
	got, _ := x.Peek(nil, &pb, true)
	require.Equal(t, a.ids[:2], got, "the public system prompt is shared")
	var e Explanation
	x.Explain(nil, &pb, leaveOne, &e)
	require.Equal(t, MissNeverStored, e.Reason, "another tenant's private copy is not reachable, nor named")
	b := admit(t, x, pool, pb)
	require.Equal(t, 2, b.hit)
	b.finish(t, x)
	require.Equal(t, 6, x.Stats().Cached, "b's identical private tokens are its own blocks")

	pa := prompt(ka)
	got, _ = x.Peek(nil, &pa, true)
	require.Equal(t, a.ids[:4], got, "a finds its whole private part again")

	// A prompt without the region continues publicly: its block is not a tenant's.
	pub := Prompt{Tokens: cat(sys, private, toks(900, 1))}
	got, _ = x.Peek(nil, &pub, true)
	require.Len(t, got, 2)
	admit(t, x, pool, pub).finish(t, x)
	x.Explain(nil, &pb, leaveOne, &e)
	require.Equal(t, MissNone, e.Reason)
	pc := prompt(SaltKey("tenant-c"))
	x.Explain(nil, &pc, leaveOne, &e)
	require.Equal(t, MissSalt, e.Reason, "the tokens are cached here without c's salt")
	require.Equal(t, 2, e.MatchedBlocks)
	require.NoError(t, x.CheckInvariants())
}

func TestSaltRegionKeepsOffsetOrder(t *testing.T) {
	mm := []MMInput{{Hash: "img1", Offset: 2, Length: 4}, {Hash: "img2", Offset: 40, Length: 4}}
	out := SaltRegion(mm, 16, SaltKey("s"))
	require.Equal(t, []string{"img1", SaltKey("s"), "img2"}, []string{out[0].Hash, out[1].Hash, out[2].Hash})
	buf := make([]MMInput, 0, 1)
	require.Zero(t, testing.AllocsPerRun(20, func() { _ = SaltRegion(buf[:0], 16, "k") }))
}
