package hybrid_test

import (
	"testing"

	"github.com/kvpage/kvpage/bench"
	"github.com/kvpage/kvpage/internal/invariant"

	"github.com/stretchr/testify/require"
)

// TestW4ModelMatchesVLLM drives the reference model of vLLM's hybrid manager with W4 and
// requires vLLM's own figures: the model is only a reference if it reproduces them.
func TestW4ModelMatchesVLLM(t *testing.T) {
	if testing.Short() || invariant.Enabled {
		t.Skip("the whole W4 trace through the reference model takes a minute under -race")
	}
	res := runW4Model(bench.NewW3Trace())
	t.Logf("hit tokens %d, evictions %d, duplicates per group %v", res.HitTokens, res.Evictions, res.Duplicates)
	require.Equal(t, bench.W4FirstHits, res.FirstHits)
	require.Equal(t, uint64(bench.W4HitTokens), res.HitTokens)
	require.Equal(t, bench.W4Evictions, res.Evictions)
}
