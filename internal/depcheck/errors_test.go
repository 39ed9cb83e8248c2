package depcheck

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocks/sizing"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
)

// TestOneInvalidArgumentStory: a bad argument to any embedded package matches every
// package's invalid-argument sentinel, its own and the others' (internal/argerr): a
// blocktable error is prefix's and blocks' ErrInvalidArgument too. Before, each package's
// sentinel matched only blocks'; blocktable's errors did not match prefix's. The
// messages still name the package that refused.
func TestOneInvalidArgumentStory(t *testing.T) {
	sentinels := map[string]error{
		"blocks": blocks.ErrInvalidArgument, "sizing": sizing.ErrInvalidArgument, "evict": evict.ErrInvalidArgument,
		"prefix": prefix.ErrInvalidArgument, "blocktable": blocktable.ErrInvalidArgument,
	}
	_, errBlocks := blocks.New(-1)
	_, errPrefix := prefix.New(nil, 16)
	_, errTable := blocktable.New(blocktable.Config{})
	_, errHybrid := hybrid.New(hybrid.Config{})
	_, errEvict := evict.NewLRU(-1)
	_, errSizing := sizing.CompareLayouts(sizing.HybridModel{Name: "x"}, 1, 1, 1)
	for name, err := range map[string]error{
		"blocks.New(-1)": errBlocks, "prefix.New(nil)": errPrefix, "blocktable.New without a pool": errTable,
		"hybrid.New without groups": errHybrid, "evict.NewLRU(-1)": errEvict, "sizing.CompareLayouts of no layers": errSizing,
		"a blocktable SeqError":  &blocktable.SeqError{Op: "append", Seq: 1, Err: blocktable.ErrInvalidArgument},
		"a blocktable SizeError": &blocktable.SizeError{Op: "admit", What: "prompt", N: 9, Max: 8},
		"a prefix SizeError":     &prefix.SizeError{What: "block size", N: 0, Max: 1},
	} {
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		for pkg, s := range sentinels {
			if !errors.Is(err, s) {
				t.Errorf("%s (%v) is not %s.ErrInvalidArgument", name, err, pkg)
			}
		}
	}
	for a, sa := range sentinels {
		for b, sb := range sentinels {
			if !errors.Is(sa, sb) {
				t.Errorf("%s.ErrInvalidArgument does not match %s's", a, b)
			}
		}
		if errors.Is(sa, blocks.ErrOutOfBlocks) || errors.Is(sa, blocktable.ErrUnknownSeq) {
			t.Errorf("%s.ErrInvalidArgument matches another kind of error", a)
		}
	}
	if got := prefix.ErrInvalidArgument.Error(); got != "prefix: invalid argument" {
		t.Errorf("prefix's message: %q", got)
	}
	if errors.Is(blocks.ErrOutOfBlocks, blocks.ErrInvalidArgument) {
		t.Error("out of blocks is not a bad argument")
	}
}
