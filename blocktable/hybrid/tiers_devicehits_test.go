package hybrid

import (
	"testing"

	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A block demoted to the host takes its device hits with it (hitRun counts them in the
// tree, whatever the write policy), so that a host policy that ranks by hits keeps the
// block the device hit four times over one it never hit: A (five runs) and B (one) are
// demoted together, A first, and C's demotion needs a host slot. LRU drops A, the least
// recent (the control); LFU drops B. Before, every copy from the device had 1 hit, and
// LFU dropped A too.
func TestTierDemotionKeepsDeviceHits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  evict.Factory
		kept    []int32
		dropped []int32
	}{
		{"lru", nil, []int32{2, 2, 2, 2, 2}, []int32{1, 1, 1, 1, 1}},
		{"lfu", func(n int, _ evict.Clock) (evict.Policy, error) { return evict.NewLFU(n, 0) }, []int32{1, 1, 1, 1, 1}, []int32{2, 2, 2, 2, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}}, NumBlocks: 8,
				Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 2, Write: prefix.WriteBack, Policy: tc.policy}},
					BlockBytes: 16, FreeTarget: 7}})
			require.NoError(t, err)
			run := func(p []int32) {
				t.Helper()
				_, err := m.AdmitTiered(0, &Request{Prompt: p, MaxTokens: 5})
				require.NoError(t, err)
				require.NoError(t, m.Finish(0))
			}
			demote := func(blocks int) {
				t.Helper()
				plans := m.TakePlans(nil)
				require.Len(t, plans, 1)
				require.Len(t, plans[0].Runs, blocks)
				_, err := m.CompleteTransfer(plans[0].ID, true)
				require.NoError(t, err)
			}
			a := []int32{1, 1, 1, 1, 1}
			for range 5 {
				run(a) // one block, hit by the last four
			}
			run([]int32{2, 2, 2, 2, 2})
			demote(2) // A's block 1, then B's
			run([]int32{3, 3, 3, 3, 3})
			demote(1) // C's: the host drops A or B
			for _, p := range [][]int32{tc.kept, tc.dropped} {
				hit, load, err := m.MatchTiers(&Request{Prompt: p})
				require.NoError(t, err)
				require.Zero(t, hit)
				want := 0
				if p[0] == tc.kept[0] {
					want = 4
				}
				require.Equal(t, want, load, "prompt %v under %s", p, tc.name)
			}
			require.NoError(t, m.CheckInvariants())
		})
	}
}

// A block loaded back from the host takes its content's uses there as its device uses, as
// an Index's promoted node takes its entry's hits: A, used three times on the device, is
// demoted (its slot starts at 3), evicted, and loaded back (a fourth use): the loaded
// block counts 4, so that a later copy of it, once the host has dropped its slot, ranks
// by all of them. Before, the commit that cached the loaded block started it at 1.
func TestTierLoadKeepsItsHits(t *testing.T) {
	m, err := New(Config{Groups: []Spec{FullAttention{Block: 4}}, NumBlocks: 4,
		Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 4, Write: prefix.WriteBack}},
			BlockBytes: 16, FreeTarget: 3}})
	require.NoError(t, err)
	a := []int32{1, 1, 1, 1, 1}
	for range 3 {
		_, err := m.AdmitTiered(0, &Request{Prompt: a, MaxTokens: 5})
		require.NoError(t, err)
		require.NoError(t, m.Finish(0))
	}
	complete := func() {
		t.Helper()
		for _, p := range m.TakePlans(nil) {
			_, err := m.CompleteTransfer(p.ID, true)
			require.NoError(t, err)
		}
	}
	complete() // A's block demoted: in the host, gone from the device
	hit, load, err := m.MatchTiers(&Request{Prompt: a})
	require.NoError(t, err)
	require.Equal(t, [2]int{0, 4}, [2]int{hit, load})
	r, err := m.AdmitTiered(1, &Request{Prompt: a, MaxTokens: 5})
	require.NoError(t, err)
	require.Equal(t, 4, r.LoadTokens)
	tb, err := m.Table(1, 0)
	require.NoError(t, err)
	complete()
	require.True(t, m.Block(tb[0]).Cached)
	require.Equal(t, uint32(4), m.st.t.DeviceHits(tb[0]), "three uses on the device, one load")
	require.NoError(t, m.CheckInvariants())
}
