package kvtest_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvtest"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   kvtest.Config
		field string // "" for a valid config
	}{
		{"zero value", kvtest.Config{}, ""},
		{"a large pool", kvtest.Config{Blocks: 1 << 20, BlockSize: 16}, ""},
		{"negative blocks", kvtest.Config{Blocks: -1}, "Blocks"},
		{"blocks beyond int32 IDs", kvtest.Config{Blocks: math.MaxInt32 + 1}, "Blocks"},
		{"negative block size", kvtest.Config{BlockSize: -4}, "BlockSize"},
		{"negative host pool", kvtest.Config{HostBlocks: -1}, "HostBlocks"},
		{"negative window", kvtest.Config{SlidingWindow: -8}, "SlidingWindow"},
		{"blocks times block size overflows", kvtest.Config{Blocks: math.MaxInt32, BlockSize: 1 << 16}, "Blocks"},
		{"a token arena past 2^32", kvtest.Config{Blocks: 1 << 27, BlockSize: 64}, "Blocks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, kvtest.ErrInvalidConfig)
			require.ErrorIs(t, err, blocktable.ErrInvalidArgument)
			require.ErrorIs(t, err, blocks.ErrInvalidArgument)
			var ce *kvtest.ConfigError
			require.True(t, errors.As(err, &ce))
			require.Equal(t, tc.field, ce.Field)
			require.Contains(t, err.Error(), "Config."+tc.field)

			// New fails the test with it, before building anything.
			tb := &fakeTB{}
			require.Nil(t, kvtest.New(tb, tc.cfg))
			require.Len(t, tb.fatals, 1)
			require.Contains(t, tb.fatals[0], "Config."+tc.field)
			require.Empty(t, tb.cleanups, "nothing was built, so nothing is checked at the end")
		})
	}
}
