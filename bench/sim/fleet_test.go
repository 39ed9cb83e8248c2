package sim

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix/cluster"
)

// fleetScale shrinks a test fleet's trace under -race and -tags kvinvariants, where every
// pool, index and manager mutation re-checks its invariants: the runs there exercise the
// checks, and the statistical claims are made at full size only.
func fleetScale(n int) int {
	if invariant.Enabled {
		return max(n/25, 8)
	}
	return n
}

// fleetCap is a test server's KV budget, smaller under the invariant checks too (they walk
// every block).
func fleetCap(tokens int) int {
	if invariant.Enabled {
		return 4096
	}
	return tokens
}

// fleetTrace is a small trace of a built-in workload with Poisson arrivals at rate per
// second.
func fleetTrace(t testing.TB, workload string, n int, rate float64) ([]Request, int) {
	t.Helper()
	w, err := LookupWorkload(workload)
	require.NoError(t, err)
	tr := w.Generate(fleetScale(n), 42)
	WithPoissonArrivals(tr, rate, 42)
	return Prepare(tr, w.MaxModelLen).Requests, w.MaxModelLen
}

func fleetConfig(servers int, policy string, capacity, maxModelLen int) FleetConfig {
	cfg := DefaultConfig(fleetCap(capacity))
	cfg.MaxModelLen = maxModelLen
	cfg.MaxNumBatchedTokens = max(cfg.MaxNumBatchedTokens, maxModelLen)
	return FleetConfig{
		Servers: servers, Server: cfg, Policy: policy, Weight: 0.5,
		Scheme: Scheme{Name: Paged, BlockSize: 16, PrefixSharing: true},
	}
}

// TestFleetPolicies runs a small overloaded sysprompt fleet under every policy: routing
// by the cache hits more than ignoring it, and every run completes every request. (Load
// imbalance and throughput depend on the fleet's size and load: bench/README.md has the
// recorded runs.)
func TestFleetPolicies(t *testing.T) {
	reqs, maxLen := fleetTrace(t, "sysprompt", 600, 48)
	res := map[string]*FleetResult{}
	for _, p := range FleetPolicies() {
		r, err := SimulateFleet(reqs, fleetConfig(4, p, 16384, maxLen))
		require.NoError(t, err)
		require.Equal(t, len(reqs), r.Completed)
		require.Positive(t, r.Batches)
		res[p] = r
	}
	rr, ll, px, pl := res[RoundRobin], res[LeastLoaded], res[PrefixAware], res[PrefixLoad]
	for _, r := range res {
		require.GreaterOrEqual(t, r.Imbalance, 1.0)
	}
	if !invariant.Enabled {
		require.Greater(t, px.HitRate, rr.HitRate, "following the cache hits more")
		require.Greater(t, pl.HitRate, ll.HitRate)
	}

	if invariant.Enabled {
		return
	}
	// Deterministic: the same run gives the same result.
	again, err := SimulateFleet(reqs, fleetConfig(4, PrefixLoad, 16384, maxLen))
	require.NoError(t, err)
	require.Equal(t, *pl, *again)
}

// TestFleetEventDelay: the router sees the servers' caches only through their events;
// delayed past the whole run, it sees nothing and expects no hit, while the servers still
// hit on what they happen to share.
func TestFleetEventDelay(t *testing.T) {
	reqs, maxLen := fleetTrace(t, "sysprompt", 300, 24)
	fc := fleetConfig(4, PrefixAware, 16384, maxLen)
	prompt := func(d int) *FleetResult {
		fc.EventDelay = d
		r, err := SimulateFleet(reqs, fc)
		require.NoError(t, err)
		return r
	}
	now, late, never := prompt(0), prompt(200), prompt(1<<20)
	require.Zero(t, never.RoutedHitRate)
	require.Positive(t, now.RoutedHitRate)
	if !invariant.Enabled {
		require.Positive(t, never.HitRate)
		require.Greater(t, now.RoutedHitRate, late.RoutedHitRate)
		require.Greater(t, late.RoutedHitRate, never.RoutedHitRate)
	}
}

// TestFleetIndexMatchesServers: after a run every batch has been applied, and the
// router's index holds for each server exactly the blocks the server's own prefix index
// has cached: the events path (observer, codec, cluster index) loses nothing.
func TestFleetIndexMatchesServers(t *testing.T) {
	reqs, maxLen := fleetTrace(t, "conversation", 200, 50)
	fc := fleetConfig(3, PrefixLoad, 8192, maxLen)
	fc.EventDelay = 3
	f, err := newFleet(reqs, fc, fc.Server, nil)
	require.NoError(t, err)
	f.router.Policy = &roundRobinForTest{}
	require.NoError(t, f.run())
	require.Empty(t, f.queue)
	for _, s := range f.servers {
		p := s.sc.a.(*paged)
		cached := p.pool.Available() - p.pool.NumFree()
		require.Positive(t, cached)
		require.Equal(t, cached, f.index.Stats(s.name).Blocks, s.name)
	}
}

type roundRobinForTest struct{ n int }

type Candidate = cluster.Candidate

func (r *roundRobinForTest) Choose(_ int, c []Candidate) int { r.n++; return r.n % len(c) }

func TestFleetRefusesBadConfig(t *testing.T) {
	reqs, maxLen := fleetTrace(t, "sysprompt", 10, 10)
	for _, mut := range []func(*FleetConfig){
		func(c *FleetConfig) { c.Servers = 0 },
		func(c *FleetConfig) { c.EventDelay = -1 },
		func(c *FleetConfig) { c.Policy = "random" },
		func(c *FleetConfig) { c.Weight = 2 },
		func(c *FleetConfig) { c.Scheme.PrefixSharing = false },
		func(c *FleetConfig) { c.Publish = func(string, []byte) error { return nil } },
	} {
		fc := fleetConfig(2, PrefixLoad, 4096, maxLen)
		mut(&fc)
		_, err := SimulateFleet(reqs, fc)
		require.True(t, errors.Is(err, ErrInvalidConfig), "%v", err)
	}
}
