package natsjs_test

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix/kvevents/natsjs"
)

// ErrInvalid matches blocks.ErrInvalidArgument, and the reverse, as every package's
// invalid-argument sentinel does (internal/argerr).
func TestErrInvalidMatchesTheLibrarys(t *testing.T) {
	sentinels := map[string]error{"natsjs": natsjs.ErrInvalid, "blocks": blocks.ErrInvalidArgument}
	for a, sa := range sentinels {
		for b, sb := range sentinels {
			if !errors.Is(sa, sb) {
				t.Errorf("%s's sentinel does not match %s's", a, b)
			}
		}
	}
}
