package kvtest_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/blocktable/kvtest"
)

func TestHybridConfigValidate(t *testing.T) {
	full := func(bs int) hybrid.Spec { return hybrid.FullAttention{Block: bs} }
	many := make([]hybrid.Spec, 256)
	for i := range many {
		many[i] = full(4)
	}
	for _, tc := range []struct {
		name  string
		cfg   kvtest.HybridConfig
		field string // "" for a valid config
		max   int64
	}{
		{"zero value", kvtest.HybridConfig{}, "", 0},
		{"a large pool", kvtest.HybridConfig{Blocks: 1 << 20, Groups: []hybrid.Spec{full(16)}}, "", 0},
		{"255 groups", kvtest.HybridConfig{Groups: many[:255]}, "", 0},
		{"2^30 blocks of the default 4 tokens: 2^32 tokens", kvtest.HybridConfig{Blocks: 1 << 30}, "", 0},
		{"negative blocks", kvtest.HybridConfig{Blocks: -1}, "Blocks", 1 << 30},
		{"blocks beyond hybrid's bound", kvtest.HybridConfig{Blocks: 1<<30 + 1}, "Blocks", 1 << 30},
		{"blocks beyond int32", kvtest.HybridConfig{Blocks: math.MaxInt32 + 1}, "Blocks", 1 << 30},
		{"negative match unit", kvtest.HybridConfig{MatchUnit: -4}, "MatchUnit", 1 << 20},
		{"match unit past any block", kvtest.HybridConfig{MatchUnit: 1<<20 + 1}, "MatchUnit", 1 << 20},
		{"256 groups", kvtest.HybridConfig{Groups: many}, "Groups", 255},
		{"a group's block past 2^20", kvtest.HybridConfig{Groups: []hybrid.Spec{full(4), full(1<<20 + 1)}}, "Groups[1].BlockSize", 1 << 20},
		// 2^30 blocks of 8 tokens are 2^33 tokens: the largest group sets the bound.
		{"a token arena past 2^32", kvtest.HybridConfig{Blocks: 1 << 30, Groups: []hybrid.Spec{full(2), full(8)}}, "Blocks", 1 << 29},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			ce := requireConfigError(t, err, "HybridConfig", tc.field)
			require.Equal(t, tc.max, ce.Max)
			require.Contains(t, err.Error(), "HybridConfig."+tc.field)

			// NewHybrid fails the test with it, before building anything.
			tb := &fakeTB{}
			require.Nil(t, kvtest.NewHybrid(tb, tc.cfg))
			requireFailedUnbuilt(t, tb, "HybridConfig."+tc.field)
		})
	}
}

// What hybrid.New refuses beyond sizes still fails NewHybrid at once, with nothing built,
// and its error is blocktable's.
func TestNewHybridRefusesWhatHybridRefuses(t *testing.T) {
	for _, cfg := range []kvtest.HybridConfig{
		{Blocks: 1}, // the null block alone
		{Groups: []hybrid.Spec{nil}},
		{Groups: []hybrid.Spec{hybrid.FullAttention{Block: 0}}},
		{Groups: []hybrid.Spec{hybrid.FullAttention{Block: 4}}, MatchUnit: 3},
		{Groups: []hybrid.Spec{hybrid.SlidingWindow{Block: 4}}},
	} {
		require.NoError(t, cfg.Validate(), "%+v", cfg)
		tb := &fakeTB{}
		require.Nil(t, kvtest.NewHybrid(tb, cfg))
		requireFailedUnbuilt(t, tb, "invalid argument")
	}
}

// The Config message keeps its form: the Struct of a Config's error is empty.
func TestConfigErrorNamesItsStruct(t *testing.T) {
	err := kvtest.Config{Blocks: -1}.Validate()
	var ce *kvtest.ConfigError
	require.True(t, errors.As(err, &ce))
	require.Empty(t, ce.Struct)
	require.Equal(t, "kvtest: Config.Blocks = -1 outside [0, 2147483647]", err.Error())
	require.Equal(t, "kvtest: HybridConfig.Blocks = -1 outside [0, 1073741824]", kvtest.HybridConfig{Blocks: -1}.Validate().Error())
}
