package kvtest

import (
	"fmt"
	"math"

	"github.com/kvpage/kvpage/blocktable"
)

// ErrInvalidConfig is matched (errors.Is) by the error Config.Validate returns, and so by
// New's failure, for a size out of range; it also matches blocktable.ErrInvalidArgument
// (and so blocks.ErrInvalidArgument). The error itself is a *ConfigError.
var ErrInvalidConfig error = configErr{}

type configErr struct{}

func (configErr) Error() string { return "kvtest: invalid config" }
func (configErr) Unwrap() error { return blocktable.ErrInvalidArgument }

// ConfigError names the Config field out of range.
type ConfigError struct {
	// Field is the field's name ("Blocks", "BlockSize", ...).
	Field string
	// N is its value; Max the largest accepted (the smallest is 0, the field's default).
	N, Max int64
}

// Error names the field, its value and the range accepted.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("kvtest: Config.%s = %d outside [0, %d]", e.Field, e.N, e.Max)
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// maxConfigTokens bounds Blocks × BlockSize, the tokens the index keeps for a full pool:
// past it the arena alone would not fit in memory (2^32 tokens are 16 GiB).
const maxConfigTokens = 1 << 32

// Validate checks the sizes of c before anything is built: no count may be negative, and
// no pool (with its default filled in) may hold more block IDs than an int32 or more
// tokens than maxConfigTokens. Values the packages below check themselves (block sizes
// above prefix's limit, watermarks) are left to them, with their own errors.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		n    int
	}{{"Blocks", c.Blocks}, {"BlockSize", c.BlockSize}, {"HostBlocks", c.HostBlocks}, {"SlidingWindow", c.SlidingWindow}} {
		if f.n < 0 || f.n > math.MaxInt32 {
			return &ConfigError{Field: f.name, N: int64(f.n), Max: math.MaxInt32}
		}
	}
	blocks, bs := max(c.Blocks, 1), c.BlockSize
	if bs == 0 {
		bs = 4
	}
	if int64(blocks)*int64(bs) > maxConfigTokens {
		return &ConfigError{Field: "Blocks", N: int64(c.Blocks), Max: maxConfigTokens / int64(bs)}
	}
	return nil
}
