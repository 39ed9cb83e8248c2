package prefix

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Peek counts nothing; RecordLookup counts one lookup with the prompt's tokens and the
// Cursor's hit.
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

}
