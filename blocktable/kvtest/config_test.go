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
			requireConfigError(t, err, "", tc.field)

			// New fails the test with it, before building anything.
			tb := &fakeTB{}
			require.Nil(t, kvtest.New(tb, tc.cfg))
			requireFailedUnbuilt(t, tb, "Config."+tc.field)
		})
	}
}

// requireConfigError asserts that err is the *ConfigError of field of the configuration
// type structName ("" for Config), matched by every sentinel it promises to match.
func requireConfigError(t *testing.T, err error, structName, field string) *kvtest.ConfigError {
	t.Helper()
	require.ErrorIs(t, err, kvtest.ErrInvalidConfig)
	require.ErrorIs(t, err, blocktable.ErrInvalidArgument)
	require.ErrorIs(t, err, blocks.ErrInvalidArgument)
	var ce *kvtest.ConfigError
	require.True(t, errors.As(err, &ce))
	require.Equal(t, structName, ce.Struct)
	require.Equal(t, field, ce.Field)
	require.Contains(t, err.Error(), "Config."+field)
	return ce
}

// requireFailedUnbuilt asserts that the kit failed tb once, saying msg, and registered no
// end-of-test check: nothing was built.
func requireFailedUnbuilt(t *testing.T, tb *fakeTB, msg string) {
	t.Helper()
	require.Len(t, tb.fatals, 1)
	require.Contains(t, tb.fatals[0], msg)
	require.Empty(t, tb.cleanups, "nothing was built, so nothing is checked at the end")
}
