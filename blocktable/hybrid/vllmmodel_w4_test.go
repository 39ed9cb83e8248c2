package hybrid_test

import (
	"testing"

	"github.com/kvpage/kvpage/bench"
	"github.com/kvpage/kvpage/internal/invariant"

	"github.com/stretchr/testify/require"
)

// W4's check values, from vLLM v1's own KVCacheManager (../shared/workloads.md).
const (
	w4HitTokens = 34627440
	w4Evictions = 2383379
)

var w4FirstHits = []int{0, 2048, 0, 0, 0, 2048, 0, 0}

// TestW4ModelMatchesVLLM drives the reference model of vLLM's hybrid manager with W4 and
// requires vLLM's own figures: the model is only a reference if it reproduces them.
func TestW4ModelMatchesVLLM(t *testing.T) {
	if testing.Short() || invariant.Enabled {
		t.Skip("the whole W4 trace through the reference model takes a minute under -race")
	}
	res := runW4Model(bench.NewW3Trace())
	t.Logf("hit tokens %d, evictions %d, duplicates per group %v", res.HitTokens, res.Evictions, res.Duplicates)
	require.Equal(t, w4FirstHits, res.FirstHits)
	require.Equal(t, uint64(w4HitTokens), res.HitTokens)
	require.Equal(t, w4Evictions, res.Evictions)
}
