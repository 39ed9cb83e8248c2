package sim

import (
	"errors"
	"math"
	"testing"

	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A pool's share of a host (or disk) too large for an int64 once scaled is capped at
// prefix.MaxTierCapacity blocks, not converted to a negative capacity: one pool taking
// the whole budget (uniform) of MaxInt64 bytes gave tier 1 a capacity of about -6.9e11.
// With the disk as large, the two capped tiers together exceed the index's bound.
func TestHybridTierShareOverflow(t *testing.T) {
	reqs, small := evictedPrefixTrace()
	s := Scheme{Name: Hybrid, Model: "qwen3-next-80b-a3b", Layout: LayoutUniform, BlockSize: 16, PrefixSharing: true,
		Tiers: Tiers{HostBytes: math.MaxInt64, DiskBytes: math.MaxInt64}}
	_, err := Simulate(reqs, small, s)
	var se *prefix.SizeError
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, int64(2*prefix.MaxTierCapacity), se.N, "%v", err)
}
