package prefix

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Peek matches exactly as Match does but counts nothing; RecordLookup counts what Match
// would have.
func TestPeekCountsNothing(t *testing.T) {
	pool, x := newTestIndex(t, 16)
	r := admit(t, x, pool, Prompt{Tokens: toks(1, 2*testBS)})
	defer r.finish(t, x)
	p := Prompt{Tokens: toks(1, 3*testBS+1)}
	before := x.Stats()

	peeked, pc := x.Peek(nil, &p, LeaveOne)
	require.Equal(t, before, x.Stats(), "Peek counts nothing")
	require.Equal(t, r.ids, peeked)
	require.Equal(t, 2, pc.Blocks())

	x.RecordLookup(&p, pc)
	afterRecord := x.Stats()
	require.Equal(t, before.Lookups+1, afterRecord.Lookups)
	require.Equal(t, before.LookedUpTokens+uint64(len(p.Tokens)), afterRecord.LookedUpTokens)
	require.Equal(t, before.HitTokens+2*testBS, afterRecord.HitTokens)

	matched, mc := x.Match(nil, &p, LeaveOne)
	require.Equal(t, peeked, matched)
	require.Equal(t, pc, mc)
	afterMatch := x.Stats()
	require.Equal(t, afterRecord.Lookups+1, afterMatch.Lookups, "Match counts as Peek plus RecordLookup")
	require.Equal(t, afterRecord.LookedUpTokens+uint64(len(p.Tokens)), afterMatch.LookedUpTokens)
	require.Equal(t, afterRecord.HitTokens+2*testBS, afterMatch.HitTokens)
}
