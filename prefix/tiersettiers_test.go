package prefix

import (
	"errors"
	"math"
	"testing"

	"github.com/kvpage/kvpage/evict"
	"github.com/stretchr/testify/require"
)

// Each SetTiers refusal returns its own typed error (a *SizeError with its figures, or
// ErrInvalidArgument naming the cause) and leaves the tree without tiers.
func TestGroupTreeSetTiersRefusals(t *testing.T) {
	failing := func(int, evict.Clock) (evict.Policy, error) { return nil, errors.New("no policy") }
	nilPolicy := func(int, evict.Clock) (evict.Policy, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		c    TierConfig
		size *SizeError // the exact *SizeError, or nil for a plain ErrInvalidArgument
		msg  string     // what the plain refusal names
	}{
		{name: "no tiers", c: TierConfig{}, size: &SizeError{What: "lower tiers", N: 0, Max: MaxTiers - 1}},
		{name: "too many tiers", c: TierConfig{Tiers: make([]TierSpec, MaxTiers)}, size: &SizeError{What: "lower tiers", N: MaxTiers, Max: MaxTiers - 1}},
		{name: "zero slots", c: TierConfig{Tiers: []TierSpec{{Capacity: 0}}}, size: &SizeError{What: "tier 1 capacity", N: 0, Max: MaxTierCapacity}},
		{name: "second tier too big", c: TierConfig{Tiers: []TierSpec{{Capacity: 2}, {Capacity: MaxTierCapacity + 1}}}, size: &SizeError{What: "tier 2 capacity", N: MaxTierCapacity + 1, Max: MaxTierCapacity}},
		{name: "total too big", c: TierConfig{Tiers: []TierSpec{{Capacity: MaxTierCapacity}, {Capacity: 1}}}, size: &SizeError{What: "lower tiers' total capacity", N: MaxTierCapacity + 1, Max: MaxTierCapacity}},
		{name: "huge blocks", c: TierConfig{Tiers: []TierSpec{{Capacity: 2}}, BlockBytes: 1 << 62}, size: &SizeError{What: "block bytes", N: 1 << 62, Max: math.MaxInt64 / 10}},
		{name: "negative block bytes", c: TierConfig{Tiers: []TierSpec{{Capacity: 2}}, BlockBytes: -1}, msg: "negative block bytes"},
		{name: "negative free target", c: TierConfig{Tiers: []TierSpec{{Capacity: 2}}, FreeTarget: -1}, msg: "negative block bytes or free target"},
		{name: "hits of 0", c: TierConfig{Tiers: []TierSpec{{Capacity: 2, Write: WriteAfterHits}}}, msg: "tier 1 write policy 2 with 0 hits"},
		{name: "unknown write policy", c: TierConfig{Tiers: []TierSpec{{Capacity: 2, Write: WriteAfterHits + 1}}}, msg: "tier 1 write policy 3"},
		{name: "policy fails", c: TierConfig{Tiers: []TierSpec{{Capacity: 2, Policy: failing}}}, msg: "tier policy: no policy"},
		{name: "nil policy", c: TierConfig{Tiers: []TierSpec{{Capacity: 2, Policy: nilPolicy}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTestTree(t, 10, 2, 1)
			err := g.SetTiers(tc.c)
			require.ErrorIs(t, err, ErrInvalidArgument)
			var se *SizeError
			if tc.size != nil {
				require.ErrorAs(t, err, &se)
				require.Equal(t, tc.size, se)
			} else {
				require.False(t, errors.As(err, &se), "not a size: %v", err)
				require.Contains(t, err.Error(), tc.msg)
			}
			_, ok := g.TierConfig()
			require.False(t, ok, "a refused SetTiers sets no tiers")
			require.Equal(t, 1, g.NumTiers())
			require.NoError(t, g.SetTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 2}}}), "and a good one is taken after")
		})
	}
	t.Run("tree has nodes", func(t *testing.T) {
		g := newTestTree(t, 10, 2, 1)
		g.Ensure(RootNode, []int32{1, 2})
		err := g.SetTiers(TierConfig{Tiers: []TierSpec{{Capacity: 2}}})
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.Contains(t, err.Error(), "SetTiers on a tree that has nodes")
		require.Equal(t, 1, g.NumTiers())
	})
}
