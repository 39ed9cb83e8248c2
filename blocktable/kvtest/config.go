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

// ConfigError names the Config (or HybridConfig) field out of range.
type ConfigError struct {
	// Struct is the configuration's type: "" for Config, "HybridConfig" for a HybridConfig.
	Struct string
	// Field is the field's name ("Blocks", "BlockSize", ...).
	Field string
	// N is its value; Max the largest accepted (the smallest is 0, the field's default).
	N, Max int64
}

// Error names the field, its value and the range accepted.
func (e *ConfigError) Error() string {
	s := e.Struct
	if s == "" {
		s = "Config"
	}
	return fmt.Sprintf("kvtest: %s.%s = %d outside [0, %d]", s, e.Field, e.N, e.Max)
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
	if err := checkCounts("", []countField{{"Blocks", c.Blocks, math.MaxInt32}, {"BlockSize", c.BlockSize, math.MaxInt32},
		{"HostBlocks", c.HostBlocks, math.MaxInt32}, {"SlidingWindow", c.SlidingWindow, math.MaxInt32}}); err != nil {
		return err
	}
	bs := c.BlockSize
	if bs == 0 {
		bs = 4
	}
	return checkTokens("", c.Blocks, bs)
}

// countField is a count of a configuration, checked against [0, max].
type countField struct {
	name   string
	n, max int
}

// checkCounts returns the error of the first field outside its range, nil if none is.
func checkCounts(structName string, fields []countField) error {
	for _, f := range fields {
		if f.n < 0 || f.n > f.max {
			return &ConfigError{Struct: structName, Field: f.name, N: int64(f.n), Max: int64(f.max)}
		}
	}
	return nil
}

// checkTokens refuses a pool of blocks (at least 1 counted) of bs tokens holding more than
// maxConfigTokens tokens, naming the Blocks field. Both are at most math.MaxInt32, so the
// product cannot overflow.
func checkTokens(structName string, blocks, bs int) error {
	if int64(max(blocks, 1))*int64(bs) > maxConfigTokens {
		return &ConfigError{Struct: structName, Field: "Blocks", N: int64(blocks), Max: maxConfigTokens / int64(bs)}
	}
	return nil
}
