package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/evict"
	"github.com/stretchr/testify/require"
)

// TestEvictTakesADemotedParent's rule under every eviction policy (demotedLeft): a
// demoted parent left a leaf by its child's eviction goes with that child when the pass
// has room and its policy takes it next (it is ranked first, its last access 0);
// otherwise it stays cached, no longer demoted, at its own last access. Under MRU the
// policy takes another candidate (q: one block, finished between the two) instead. Before,
// the parent then stayed cached and demoted, counted in the device's Pending with no copy
// in flight, until some later eviction reached it, and ranked with last access 0.
func TestEvictTakesADemotedParentUnderEveryPolicy(t *testing.T) {
	for _, c := range []struct {
		name    string
		policy  evict.Factory
		qBefore bool // q finishes before the child's failed copy ranks the child as used now
		taken   bool // the policy takes the parent next
	}{
		{"lru", nil, false, true},
		{"mru", func(n int, _ evict.Clock) (evict.Policy, error) { return evict.NewMRU(n) }, true, false},
		{"lfu", func(n int, _ evict.Clock) (evict.Policy, error) { return evict.NewLFU(n, 0) }, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := []Option{WithTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 8}}, BlockBytes: 1, FreeTarget: 11})}
			if c.policy != nil {
				opts = append(opts, WithPolicy(c.policy))
			}
			pool, x := newTestIndex(t, 12, opts...)
			pp := Prompt{Tokens: toks(100, 5)} // one full block: the parent
			admit(t, x, pool, pp).finish(t, x)
			completeAll(t, x, x.TakePlans(nil), true)            // demoted into the host, evicted
			a := admit(t, x, pool, Prompt{Tokens: toks(100, 9)}) // the parent again, and a child
			a.finish(t, x)
			plans := x.TakePlans(nil) // the child's demotion; the parent, in the host, demoted with no copy
			require.Len(t, plans, 1)
			q := Prompt{Tokens: toks(500, 5)}
			if c.qBefore {
				admit(t, x, pool, q).finish(t, x)
			}
			completeAll(t, x, plans, false) // the child stays cached, ranked as used now
			if !c.qBefore {
				admit(t, x, pool, q).finish(t, x)
			}
			require.Equal(t, 1, x.TierStatsOf(Device).Pending, "the parent, evicted after its child")
			require.Equal(t, 3, x.Reclaimable())

			last := x.nodes[nodeOf(a.ids[0])].lastAccess
			require.Equal(t, 2, x.Evict(2))
			require.False(t, x.IsCached(a.ids[1]), "the child, the policy's first victim")
			require.Equal(t, !c.taken, x.IsCached(a.ids[0]), "the parent, with its child if taken next")
			if !c.taken {
				require.Equal(t, last, x.nodes[nodeOf(a.ids[0])].lastAccess, "ranked at its own last access")
				require.Zero(t, x.nodes[nodeOf(a.ids[0])].flags&flagDemote, "no longer demoted")
			}
			require.Equal(t, 1, x.Reclaimable(), "q or the parent stays")
			require.Zero(t, x.TierStatsOf(Device).Pending, "no demotion in flight")
			lost := uint64(1) // the child's block; q's too if evicted in the parent's place
			if !c.taken {
				lost = 2
			}
			require.Equal(t, lost, x.TierStatsOf(Device).Lost)
			require.NoError(t, x.CheckInvariants())
		})
	}
}
