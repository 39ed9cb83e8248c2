package depcheck

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix"
)

// TestOneInvalidArgumentStory: a bad argument to any embedded package matches
// blocks.ErrInvalidArgument, and its own package's sentinel too.
func TestOneInvalidArgumentStory(t *testing.T) {
	_, err := blocks.New(-1)
	if !errors.Is(err, blocks.ErrInvalidArgument) {
		t.Fatalf("blocks.New(-1): %v", err)
	}
	_, err = prefix.New(nil, 16)
	if !errors.Is(err, blocks.ErrInvalidArgument) || !errors.Is(err, prefix.ErrInvalidArgument) {
		t.Fatalf("prefix.New(nil): %v", err)
	}
	_, err = blocktable.New(blocktable.Config{})
	if !errors.Is(err, blocks.ErrInvalidArgument) || !errors.Is(err, blocktable.ErrInvalidArgument) {
		t.Fatalf("blocktable.New without a pool: %v", err)
	}
	if errors.Is(blocks.ErrInvalidArgument, prefix.ErrInvalidArgument) {
		t.Fatal("the pool's sentinel must not match the index's")
	}
}
