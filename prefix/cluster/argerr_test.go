package cluster_test

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
)

// The router's and the events' invalid-argument sentinels match the library's, and the
// library's match them, as every package's do (internal/argerr); each keeps its message.
func TestInvalidArgumentMatchesTheLibrarys(t *testing.T) {
	sentinels := map[string]error{
		"cluster": cluster.ErrInvalidArgument, "kvevents": kvevents.ErrInvalidArgument,
		"blocks": blocks.ErrInvalidArgument, "blocktable": blocktable.ErrInvalidArgument,
	}
	for a, sa := range sentinels {
		for b, sb := range sentinels {
			if !errors.Is(sa, sb) {
				t.Errorf("%s's sentinel does not match %s's", a, b)
			}
		}
	}
	if !errors.Is(kvevents.ErrNilSink, blocks.ErrInvalidArgument) {
		t.Error("kvevents.ErrNilSink is not blocks.ErrInvalidArgument")
	}
	if got := cluster.ErrInvalidArgument.Error(); got != "cluster: invalid argument" {
		t.Errorf("cluster's message: %q", got)
	}
}
