package prefix

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/stretchr/testify/require"
)

// A GroupTree tier gives its policy each slot's hits, as an Index's tiers do: 1 for the
// stored content, one more per load confirmed from the slot (a slot copied down between
// lower tiers keeps its count). A host of two slots holds A, loaded back once (2 hits),
// and B, stored after A's load (1 hit, the most recent); storing C needs a victim. LRU
// takes A, the least recent; the policies that read Hits keep the reused A and take the
// one-hit wonder B. Before, every slot had 0 hits: SLRU put A in probation, S3FIFO in its
// small queue, LFU counted it as B, and all three took A (the LRU row is the control).
// SLRU protects all its candidates here: its default 80% of two protects one, of one
// none, and A is added back after its load with B not yet stored.
func TestGroupTreeTierPoliciesSeeHits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy evict.Factory
		victim string
	}{
		{"lru", nil, "A"},
		{"slru", func(n int, _ evict.Clock) (evict.Policy, error) { return evict.NewSLRU(n, 100) }, "B"},
		{"s3fifo", func(n int, _ evict.Clock) (evict.Policy, error) { return evict.NewS3FIFO(n, 0) }, "B"},
		{"lfu", func(n int, _ evict.Clock) (evict.Policy, error) { return evict.NewLFU(n, 0) }, "B"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTieredTree(t, 10, TierSpec{Medium: MediumCPU, Capacity: 2, Policy: tc.policy})
			path := pathOf(g, RootNode, []int32{1, 2, 3, 4, 5, 6})
			a, b, c := path[0], path[1], path[2]
			store := func(id blocks.ID, n Node) {
				t.Helper()
				require.NoError(t, g.Cache(id, n, 0))
				require.True(t, g.PrepareStore(id))
				for _, p := range g.TakePlans(nil) {
					_, _, err := g.CompleteTransfer(p.ID, true, nil)
					require.NoError(t, err)
				}
			}
			store(1, a)
			require.NoError(t, g.Uncache(1))
			_, err := g.PrepareLoad([]GroupLoad{{Node: a, Group: 0, Dst: 2}}) // A's second use
			require.NoError(t, err)
			for _, p := range g.TakePlans(nil) {
				_, _, err := g.CompleteTransfer(p.ID, true, nil)
				require.NoError(t, err)
			}
			store(3, b)
			store(4, c) // the host is full: one of A and B goes
			require.NoError(t, g.CheckInvariants())
			kept := map[string]Node{"A": a, "B": b}
			for name, n := range kept {
				want := Tier(1)
				if name == tc.victim {
					want = Device
				}
				require.Equal(t, want, g.LowerTier(n, 0), "%s under %s", name, tc.name)
			}
			require.Equal(t, Tier(1), g.LowerTier(c, 0))
		})
	}
}
