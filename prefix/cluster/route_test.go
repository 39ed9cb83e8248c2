package cluster_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

func TestPolicies(t *testing.T) {
	cands := []cluster.Candidate{
		{Server: "a", Cached: 0, Load: 1},
		{Server: "b", Cached: 6, Load: 9},
		{Server: "c", Cached: 6, Offloaded: 2, Load: 10},
		{Server: "d", Cached: 3, Load: 2},
	}
	for _, tc := range []struct {
		name   string
		policy cluster.Policy
		want   string
	}{
		{"least loaded", cluster.LeastLoaded{}, "a"},
		{"prefix aware: most cached, then offloaded", cluster.PrefixAware{}, "c"},
		{"prefix+load, weight 1", cluster.PrefixLoad{Weight: 1}, "b"}, // c's offloaded blocks are worth 0
		{"prefix+load, weight 1, offloaded worth half", cluster.PrefixLoad{Weight: 1, OffloadedWeight: 0.5}, "c"},
		{"prefix+load, weight 0", cluster.PrefixLoad{Weight: 0}, "a"},
		// 0.5*6/8 - 0.5*9/10 = -0.075 (b); 0.5*3/8 - 0.5*2/10 = 0.0875 (d); 0.5*0 - 0.05 (a)
		{"prefix+load, weight 0.5", cluster.PrefixLoad{Weight: 0.5}, "d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, cands[tc.policy.Choose(8, cands)].Server)
		})
	}
	require.InDelta(t, 0.0875, cluster.PrefixLoad{Weight: 0.5}.Score(8, cands[3], 10), 1e-12)

	var rr cluster.RoundRobin
	var got []string
	for range 5 {
		got = append(got, cands[rr.Choose(8, cands)].Server)
	}
	require.Equal(t, []string{"a", "b", "c", "d", "a"}, got)

	ties := []cluster.Candidate{{Server: "x", Cached: 2, Load: 1}, {Server: "y", Cached: 2, Load: 1}}
	for _, p := range []cluster.Policy{cluster.LeastLoaded{}, cluster.PrefixAware{}, cluster.PrefixLoad{Weight: 0.5}} {
		require.Equal(t, 0, p.Choose(4, ties), "%T: ties go to the earliest candidate", p)
	}
	require.Equal(t, 0, cluster.PrefixLoad{Weight: 0.5}.Choose(0, []cluster.Candidate{{Server: "x"}, {Server: "y"}}), "no full block, no load")
}

func TestRouterOverClusterIndex(t *testing.T) {
	c, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR("0"), 4)
	require.NoError(t, err)
	sys := prompt(prefix.Namespace{}, 100, 24)
	require.NoError(t, c.Apply("b", storeChain(t, "0", sys, 4, 0, 6)))
	require.NoError(t, c.Apply("c", storeChain(t, "0", sys, 4, 0, 2)))
	servers := []string{"a", "b", "c"}
	r := cluster.Router{Index: c, Policy: cluster.PrefixLoad{Weight: 0.5}}

	d, err := r.Route(sys, servers, []float64{0, 1, 1})
	require.NoError(t, err)
	// a: 0 - 0 = 0; b: 0.5*6/6 - 0.5*1 = 0; c: 0.5*2/6 - 0.5 < 0: the tie goes to a.
	require.Equal(t, cluster.Decision{Server: "a", Cached: 0, Best: 6}, d)
	d, err = r.Route(sys, servers, []float64{4, 1, 1})
	require.NoError(t, err)
	require.Equal(t, cluster.Decision{Server: "b", Cached: 6, Best: 6}, d)

	_, err = r.Route(sys, servers, []float64{0, 1})
	require.ErrorIs(t, err, cluster.ErrInvalidArgument)
	_, err = r.Route(sys, servers, []float64{0, math.NaN(), 1})
	require.ErrorIs(t, err, cluster.ErrInvalidArgument)
	_, err = r.Route(sys, nil, nil)
	require.ErrorIs(t, err, cluster.ErrInvalidArgument)

	loads := []float64{4, 1, 1}
	allocs := testing.AllocsPerRun(100, func() { _, _ = r.Route(sys, servers, loads) })
	require.Zero(t, allocs, "a steady router allocates nothing")
}
