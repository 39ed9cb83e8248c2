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

// A copy from the device starts its slot with the block's uses there (SetDeviceHits), as
// an Index's lower-tier entry starts with its node's hits: a host of two slots holds A,
// hit 50 times on the device before its store, and B, stored after it with its one use;
// storing C needs a victim. LRU takes A, the least recent (the control); the policies
// that read hits keep A and take B. Before, every copy from the device started at 1 hit,
// and all four took A. A swap's copy (Hold) counts the same way.
func TestGroupTreeTierSlotStartsWithDeviceHits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy evict.Factory
		hold   bool
		victim string
	}{
		{"lru", nil, false, "A"},
		{"slru", func(n int, _ evict.Clock) (evict.Policy, error) { return evict.NewSLRU(n, 100) }, false, "B"},
		{"s3fifo", func(n int, _ evict.Clock) (evict.Policy, error) { return evict.NewS3FIFO(n, 0) }, false, "B"},
		{"lfu", func(n int, _ evict.Clock) (evict.Policy, error) { return evict.NewLFU(n, 0) }, false, "B"},
		{"lfu, A held", func(n int, _ evict.Clock) (evict.Policy, error) { return evict.NewLFU(n, 0) }, true, "B"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTieredTree(t, 10, TierSpec{Medium: MediumCPU, Capacity: 2, Policy: tc.policy})
			path := pathOf(g, RootNode, []int32{1, 2, 3, 4, 5, 6})
			a, b, c := path[0], path[1], path[2]
			done := func() {
				t.Helper()
				for _, p := range g.TakePlans(nil) {
					_, _, err := g.CompleteTransfer(p.ID, true, nil)
					require.NoError(t, err)
				}
			}
			store := func(id blocks.ID, n Node, hits uint32) {
				t.Helper()
				require.NoError(t, g.Cache(id, n, 0))
				g.SetDeviceHits(id, hits)
				require.True(t, g.PrepareStore(id))
				done()
			}
			if tc.hold {
				require.NoError(t, g.Cache(1, a, 0))
				g.SetDeviceHits(1, 50)
				h, stored, err := g.Hold([]blocks.ID{1}, nil)
				require.NoError(t, err)
				require.Equal(t, []blocks.ID{1}, stored)
				done()
				require.NoError(t, g.ReleaseHold(h))
			} else {
				store(1, a, 50)
			}
			require.Equal(t, uint32(50), g.DeviceHits(1))
			store(2, b, 1)
			store(3, c, 1) // the host is full: one of A and B goes
			require.NoError(t, g.CheckInvariants())
			for name, n := range map[string]Node{"A": a, "B": b} {
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

// SetDeviceHits and DeviceHits do nothing, and report 0, without lower tiers and for an
// ID outside the pool.
func TestGroupTreeDeviceHitsBounds(t *testing.T) {
	plain := newTestTree(t, 4, 2, 1)
	plain.SetDeviceHits(1, 7)
	require.Zero(t, plain.DeviceHits(1))
	g := newTieredTree(t, 4, TierSpec{Medium: MediumCPU, Capacity: 2})
	for _, b := range []blocks.ID{-1, 4, 1 << 30} {
		g.SetDeviceHits(b, 7)
		require.Zero(t, g.DeviceHits(b))
	}
	g.SetDeviceHits(3, 7)
	require.Equal(t, uint32(7), g.DeviceHits(3))
}
