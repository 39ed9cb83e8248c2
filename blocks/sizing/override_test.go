package sizing

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBytesPerTokenModel(t *testing.T) {
	for _, tt := range []struct {
		bytes  int64
		tp     int
		perGPU int64
	}{{50_000, 1, 50_000}, {50_000, 16, 3_125}, {131_072, 8, 16_384}, {3, 1, 3}, {327_680, 4, 81_920}, {1 << 26, 1, 1 << 26}, {999_983, 1, 999_983}} {
		m, err := BytesPerTokenModel(tt.bytes)
		require.NoError(t, err, tt.bytes)
		l, err := NewKVLayout(m, INT8, tt.tp, 16)
		require.NoError(t, err, tt.bytes)
		assert.Equal(t, Bits(8*tt.bytes), l.BitsPerToken(), tt.bytes)
		assert.Equal(t, Bits(8*tt.perGPU), l.BitsPerTokenPerGPU(), "%d over %d GPUs", tt.bytes, tt.tp)
	}
	for _, bad := range []int64{-1, 0, 1, 1<<26 + 1} {
		_, err := BytesPerTokenModel(bad)
		assert.ErrorIs(t, err, ErrInvalidArgument, bad)
	}
}
