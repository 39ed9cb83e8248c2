package kvtest

import "strconv"

// defaultHybridBlocks is HybridConfig's default pool: the null block and 16 usable.
const defaultHybridBlocks = 17

// Bounds of hybrid.New (blocktable/hybrid/manager.go and spec.go), checked here too so
// that a HybridConfig out of them fails with a *ConfigError before anything is built.
const (
	maxHybridGroups    = 255
	maxHybridBlocks    = 1 << 30
	maxHybridBlockSize = 1 << 20
)

// Validate checks the sizes of c before anything is built, as Config.Validate does: no
// count may be negative or above what hybrid.New accepts (255 groups, 2^30 blocks, a match
// unit of 2^20 tokens, groups' blocks of 2^20 tokens), and the pool (with its default
// filled in) may not hold more than 2^32 tokens in blocks of its largest group's size.
// The error is a *ConfigError (Struct "HybridConfig") matching ErrInvalidConfig and
// blocktable.ErrInvalidArgument. What hybrid.New checks beyond sizes (a nil group, a block
// size below 1, a match unit that does not divide the block sizes, a window of 0) is left
// to it, with its own errors.
func (c HybridConfig) Validate() error {
	const name = "HybridConfig"
	if err := checkCounts(name, []countField{{"Groups", len(c.Groups), maxHybridGroups},
		{"Blocks", c.Blocks, maxHybridBlocks}, {"MatchUnit", c.MatchUnit, maxHybridBlockSize}}); err != nil {
		return err
	}
	largest := 4 // the default groups' block size
	if len(c.Groups) > 0 {
		largest = 1
	}
	for i, g := range c.Groups {
		if g == nil {
			continue
		}
		bs := g.BlockSize()
		if bs > maxHybridBlockSize {
			return &ConfigError{Struct: name, Field: groupField(i), N: int64(bs), Max: maxHybridBlockSize}
		}
		largest = max(largest, bs)
	}
	blocks := c.Blocks
	if blocks == 0 {
		blocks = defaultHybridBlocks
	}
	return checkTokens(name, blocks, largest)
}

// groupField names group i's block size as a field: "Groups[i].BlockSize".
func groupField(i int) string { return "Groups[" + strconv.Itoa(i) + "].BlockSize" }
