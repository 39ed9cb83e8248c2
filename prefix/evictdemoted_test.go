package prefix

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A write-back demotion of a leaf whose parent the host already holds marks the parent
// demoted with no copy of its own: it leaves the device right after its child. When the
// child's copy failed, the child stayed cached (a failed demotion keeps its block) and the
// parent stayed demoted above it. An eviction of the child then put the parent back into
// the eviction set still demoted, where evictPopped evicts it along: the device's Pending
// counted a demotion with no copy in flight, and the parent, which the demotion had
// promised to take off the device, stayed cached as any candidate. Now the parent goes
// with its child when the pass has room for it, and otherwise stays a candidate that is
// no longer demoted.
func TestEvictTakesADemotedParent(t *testing.T) {
	for _, c := range []struct {
		name   string
		n      int
		parent bool // the parent is still cached after the eviction
	}{
		{"room for the parent", 2, false},
		{"no room for the parent", 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool, x := newTestIndex(t, 12, WithTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 8}}, BlockBytes: 1, FreeTarget: 11}))
			pp := Prompt{Tokens: toks(100, 5)} // one full block: the parent
			admit(t, x, pool, pp).finish(t, x)
			completeAll(t, x, x.TakePlans(nil), true) // demoted into the host, evicted
			require.Zero(t, x.Reclaimable())
			pa := Prompt{Tokens: toks(100, 9)} // the parent again, and a child
			a := admit(t, x, pool, pa)
			a.finish(t, x)
			plans := x.TakePlans(nil) // the child's demotion; the parent, in the host, demoted with no copy
			require.Len(t, plans, 1)
			require.Equal(t, 1, plans[0].Blocks)
			require.Equal(t, 2, x.TierStatsOf(Device).Pending)
			completeAll(t, x, plans, false)
			require.Equal(t, 1, x.TierStatsOf(Device).Pending, "the parent, evicted after its child")
			require.Equal(t, 2, x.Reclaimable())

			require.Equal(t, c.n, x.Evict(c.n))
			require.Equal(t, c.parent, x.IsCached(a.ids[0]))
			require.False(t, x.IsCached(a.ids[1]))
			require.Zero(t, x.PendingTransfers())
			require.Zero(t, x.TierStatsOf(Device).Pending, "no demotion in flight")
			require.Equal(t, uint64(1), x.TierStatsOf(Device).Lost, "the child's block alone")
			require.NoError(t, x.CheckInvariants())
		})
	}
}
