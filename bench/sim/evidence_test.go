package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/internal/invariant"
)

// The default comparison's shape, on less memory and fewer requests: the
// three contiguous schemes in order, paging at block size 16 above 95% real tokens, and
// paging running several times as many requests as Orca-Max. The figures of the full
// default run are in bench/README.md.
func TestComparisonShape(t *testing.T) {
	n, capacity := 4000, 100_000
	if invariant.Enabled {
		// The library re-checks its invariants on every mutation in these builds, at a
		// cost that grows with the pool: a smaller memory and fewer requests.
		n, capacity = 800, 30_000
	}
	w, err := LookupWorkload("sharegpt")
	require.NoError(t, err)
	p := Prepare(w.Generate(n, 42), DefaultMaxModelLen)
	cfg := DefaultConfig(capacity)
	res, err := Compare(p.Requests, cfg, []Scheme{{Name: OrcaMax}, {Name: OrcaPow2}, {Name: OrcaOracle}, {Name: Paged, BlockSize: 16}})
	require.NoError(t, err)
	max, pow2, oracle, paged := res[0], res[1], res[2], res[3]
	assert.Less(t, max.Shares.Tokens, pow2.Shares.Tokens)
	assert.Less(t, pow2.Shares.Tokens, oracle.Shares.Tokens)
	assert.Less(t, oracle.Shares.Tokens, paged.Shares.Tokens)
	assert.GreaterOrEqual(t, paged.Shares.Tokens, 0.95)
	assert.Greater(t, paged.MeanRunning, 3*max.MeanRunning)
	assert.Greater(t, paged.CompletedPerKStep, 3*max.CompletedPerKStep)
	// Where each contiguous scheme loses memory.
	assert.Greater(t, max.Shares.Internal, 0.5, "orca-max reserves 2,048 slots for requests a few hundred long")
	assert.Zero(t, oracle.Shares.Internal, "orca-oracle never reserves past the true length")
	assert.Greater(t, oracle.Shares.External, max.Shares.External, "exact reservations of every size fragment the arena")
	assert.Less(t, paged.Shares.Internal, 0.02)
	assert.Less(t, paged.Shares.External, 0.001)
}
