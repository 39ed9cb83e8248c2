package kvtest_test

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvtest"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/stretchr/testify/require"
)

// TestFreedMetadataIsPoisoned: under the kvinvariants tag (and -race), a scheduler that
// keeps the slice of Manager.Blocks or Manager.Tokens past a Finish or a Truncate reads
// poison, not plausible stale IDs and tokens.
func TestFreedMetadataIsPoisoned(t *testing.T) {
	if !invariant.Enabled {
		t.Skip("poisoning is on only under -tags kvinvariants or -race")
	}
	env := kvtest.New(t, kvtest.Config{})
	m, r1 := env.Manager, env.Seq("r1")
	_, err := m.Admit(r1, &blocktable.Request{Prompt: kvtest.MustTokens("0..9"), Lookahead: 4})
	require.NoError(t, err)
	tbl, err := m.Blocks(r1)
	require.NoError(t, err)
	toks, err := m.Tokens(r1)
	require.NoError(t, err)
	kept, keptToks := tbl[:cap(tbl)], toks[:cap(toks)]

	require.NoError(t, m.Truncate(r1, 5))
	require.Less(t, int(kept[3]), 0, "the entry Truncate released is poisoned: %v", kept)
	require.Less(t, keptToks[7], int32(0), "the tokens Truncate dropped are poisoned")

	require.NoError(t, m.Finish(r1))
	for _, id := range kept {
		require.Less(t, int(id), 0, "every entry of a finished table is poisoned: %v", kept)
		require.NotEqual(t, blocks.NullID, id)
	}
	require.Less(t, keptToks[0], int32(0))
}
