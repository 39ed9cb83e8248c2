package sizing

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The expected values are what vLLM's human_readable_int returns for the same strings
// (vllm/utils/argparse_utils.py): its docstring's examples and the rules it implements.
func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"32768", 32768},
		{"0", 0},
		{"32k", 32_000},
		{"32K", 32_768},
		{"1k", 1_000},
		{"1K", 1_024},
		{"25.6k", 25_600},
		{"128K", 131_072},
		{"1m", 1_000_000},
		{"1M", 1 << 20},
		{"2g", 2_000_000_000},
		{"1G", 1 << 30},
		{"1t", 1_000_000_000_000},
		{"1T", 1 << 40},
		{"0.5k", 500},
		{" 8k\t", 8_000},
		{"+8", 8},
		{"1_000", 1000},
		{"007", 7},
		{"-0", 0},
		{"1.005k", 1004},  // float64 1.005 * 1000 = 1004.9999...: vLLM truncates it to 1004 too
		{"8.2m", 8199999}, // likewise 8199999.999...
		{"1.0005k", 1000},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseSizeRejects(t *testing.T) {
	tests := []struct {
		in, reason string
	}{
		{"32q", "not an integer"},
		{"", "empty"},
		{"   ", "empty"},
		{"-5", "negative"},
		{"-1k", "not an integer"},
		{"2.5K", "did you mean 2.5k?"},
		{"1.5", "not an integer"},
		{".5k", "not an integer"},
		{"5.k", "not an integer"},
		{"k", "not an integer"},
		{"32 k", "not an integer"},
		{"1e3", "not an integer"},
		{"0x10", "not an integer"},
		{"_1", "not an integer"},
		{"1_", "not an integer"},
		{"1__0", "not an integer"},
		{"32kk", "not an integer"},
		{"32kb", "not an integer"},
		{"99999999999999999999", "too large"},
		{"9999999999T", "too large"},
		{"99999999999t", "too large"},
		{"-99999999999999999999", "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseSize(tt.in)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrBadSize)
			var se *SizeError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.in, se.Input)
			assert.Contains(t, err.Error(), tt.reason)
		})
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"32k", "32K", "25.6k", "1_000", "-5", "2.5K", "32q", "1T", " 7 ", "+0", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			require.ErrorIs(t, err, ErrBadSize)
			require.Zero(t, n)
			return
		}
		require.GreaterOrEqual(t, n, int64(0))
		v := strings.TrimSpace(s)
		// A plain decimal integer means itself.
		if allDigits(v) {
			want, perr := strconv.ParseInt(v, 10, 64)
			require.NoError(t, perr)
			require.Equal(t, want, n)
		}
		// A binary suffix multiplies exactly; a decimal one multiplies a float64 and
		// truncates, as vLLM does.
		if num, suffix, ok := splitSuffix(v); ok {
			switch suffix {
			case 'K', 'M', 'G', 'T':
				shift := map[byte]uint{'K': 10, 'M': 20, 'G': 30, 'T': 40}[suffix]
				base, perr := strconv.ParseInt(num, 10, 64)
				require.NoError(t, perr)
				require.Equal(t, base<<shift, n)
			default:
				fv, _ := strconv.ParseFloat(num, 64)
				mult := map[byte]float64{'k': 1e3, 'm': 1e6, 'g': 1e9, 't': 1e12}[suffix]
				require.Equal(t, int64(math.Trunc(fv*mult)), n)
			}
		}
	})
}

func TestSizeErrorUnwrap(t *testing.T) {
	_, err := ParseSize("nope")
	assert.True(t, errors.Is(err, ErrBadSize))
	assert.False(t, errors.Is(err, ErrInvalidArgument))
}

func TestParseBytes(t *testing.T) {
	good := map[string]int64{
		"80GiB": 80 << 30, "80 GiB": 80 << 30, "80gib": 80 << 30, "80Gi": 80 << 30,
		"80GB": 80e9, "80G": 80e9, "80gb": 80e9, "14GB": 14e9, "5GB": 5e9,
		"0.05MB": 50_000, "0.05 mb": 50_000, ".5KiB": 512, "81559MiB": 81559 << 20,
		"1": 1, "1024B": 1024, "1.9": 1, "2k": 2000, "2K": 2000, "2KiB": 2048, "1TB": 1e12, "1TiB": 1 << 40,
		"0.29kB": 290, "64PiB": 0,
	}
	delete(good, "64PiB")
	for in, want := range good {
		got, err := ParseBytes(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"", "GB", "80XB", "-1GB", "1e308", "1e3", "1.2.3GB", "80 G B", "80GiBs", "99999999TB", "0x10"} {
		_, err := ParseBytes(in)
		assert.ErrorIs(t, err, ErrBadSize, in)
	}
}
