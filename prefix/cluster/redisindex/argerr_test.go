package redisindex_test

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
)

// ErrInvalid matches blocks' and cluster's invalid-argument sentinels, and they match it,
// as every package's does (internal/argerr).
func TestErrInvalidMatchesTheLibrarys(t *testing.T) {
	sentinels := map[string]error{"redisindex": redisindex.ErrInvalid, "blocks": blocks.ErrInvalidArgument, "cluster": cluster.ErrInvalidArgument}
	for a, sa := range sentinels {
		for b, sb := range sentinels {
			if !errors.Is(sa, sb) {
				t.Errorf("%s's sentinel does not match %s's", a, b)
			}
		}
	}
}
