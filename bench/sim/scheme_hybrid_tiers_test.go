package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
)

// evictedPrefixTrace is a hand trace for qwen3-next-80b-a3b on 16,384 token-equivalents
// (max-model-len 2,048): request 0 computes an 800-token prefix, three requests of 2,040
// private tokens, one after the other, push its blocks off the device, and request 4
// resends the prefix with 100 tokens of its own. The model's hit unit is 544 tokens (one
// uniform block; the per-class and carved layouts cache the linear-attention state
// every 544 tokens too), so what request 4 can hit is 544 of its 900 tokens.
func evictedPrefixTrace() ([]Request, Config) {
	reqs := []Request{
		{ID: 0, Input: 800, Output: 2, Group: 0, Shared: 800},
		{ID: 1, Input: 2040, Output: 2, Group: -1, After: 1},
		{ID: 2, Input: 2040, Output: 2, Group: -1, After: 1},
		{ID: 3, Input: 2040, Output: 2, Group: -1, After: 1},
		{ID: 4, Input: 900, Output: 2, Group: 0, Shared: 800, After: 1},
	}
	cfg := DefaultConfig(16 << 10)
	cfg.MaxModelLen = 2048
	return reqs, cfg
}

// With a host tier the hybrid scheme finds the evicted prefix there under every layout
// (the per-class layout's two pools both serve it: the common hit), loads it instead of
// computing it, and says so per tier; without one it hits nothing. The tokens are
// counted once, not once per group: the host's blocks loaded (summed over groups and
// pools) are more than the 544 tokens' blocks, and the Managers' own count of loaded
// tokens is 544.
func TestHybridHostTierServesEvictedPrefix(t *testing.T) {
	reqs, cfg := evictedPrefixTrace()
	const prompt, hit = 800 + 3*2040 + 900, 544
	for _, layout := range HybridLayouts {
		s := Scheme{Name: Hybrid, Model: "qwen3-next-80b-a3b", Layout: layout, BlockSize: 16, PrefixSharing: true}
		bare, _, err := simulateWith(reqs, cfg, s, true)
		require.NoError(t, err, s.Label())
		require.Zero(t, bare.PrefixHitRate, "%s: the device alone lost the prefix", s.Label())
		require.Nil(t, bare.Tiers)

		for _, gbps := range []float64{0, 25} {
			s.Tiers = Tiers{HostBytes: 8 << 30, HostGBps: gbps}
			r, a, err := simulateWith(reqs, cfg, s, true)
			require.NoError(t, err, s.Label())
			require.Equal(t, float64(hit)/prompt, r.PrefixHitRate, s.Label())
			require.Len(t, r.Tiers, 2)
			dev, host := r.Tiers[0], r.Tiers[1]
			require.Equal(t, prefix.MediumGPU, dev.Medium)
			require.Zero(t, dev.HitTokens, "%s: nothing of the prefix was left on the device", s.Label())
			require.Equal(t, uint64(hit), host.HitTokens, "%s: the recompute the host saved", s.Label())
			require.Equal(t, float64(hit)/prompt, host.HitRate)
			// Blocks summed over groups (and pools) are not tokens: uniform, four groups of a
			// 544-token block each; per-class, 34 blocks of 16 in the attention pool and
			// one state; carved, every group's units.
			require.Equal(t, map[string]uint64{LayoutUniform: 4, LayoutPerClass: 35, LayoutCarved: 135}[layout], host.LoadedBlocks, s.Label())
			require.Equal(t, uint64(1), dev.Loads, "request 4 loaded")
			require.Positive(t, host.StoredBlocks)
			require.Equal(t, int64(8<<30)/host.CapacityBytes, int64(1), "the pools' shares of 8 GiB, whole blocks")
			ha := a.(*hybridAlloc)
			for i, p := range ha.pools {
				require.Equal(t, uint64(hit), p.m.TierCounts().LoadedTokens, "%s: pool %d", s.Label(), i)
			}
			if gbps > 0 {
				require.GreaterOrEqual(t, dev.MeanWaitPerLoad, 1.0, "request 4 waited for its load")
				require.Positive(t, host.LinkUtilization)
			} else {
				require.Zero(t, dev.MeanWaitPerLoad)
			}
		}
	}
}

// Under Mamba align mode the lower tiers serve the evicted prefix too: the Mamba groups
// load their state at the hit from the host (or the disk), as vLLM's offloading
// connector does, and the attention groups their blocks. Without a tier the run hits
// nothing; with one, request 4 hits 544 tokens, all loaded (none computed), under every
// layout, with the simulator's every-step checks on. The per-class layout's attention
// pool, larger under align mode (its state pool holds only running and last states),
// still has the prefix's first 13 blocks (208 tokens) on the device and loads 336
// tokens; the common hit is what counts, and it is all the host's.
func TestHybridHostTierServesEvictedPrefixMambaAlign(t *testing.T) {
	reqs, cfg := evictedPrefixTrace()
	const prompt, hit = 800 + 3*2040 + 900, 544
	for _, layout := range HybridLayouts {
		s := Scheme{Name: Hybrid, Model: "qwen3-next-80b-a3b", Layout: layout, BlockSize: 16, PrefixSharing: true, MambaMode: "align"}
		require.NoError(t, s.validate(&cfg), s.Label())
		bare, _, err := simulateWith(reqs, cfg, s, true)
		require.NoError(t, err, s.Label())
		require.Zero(t, bare.PrefixHitRate, "%s: the device alone lost the prefix", s.Label())
		require.Nil(t, bare.Tiers)

		for _, tiers := range []Tiers{{HostBytes: 8 << 30}, {HostBytes: 8 << 30, HostGBps: 25}, {HostBytes: 1 << 28, DiskBytes: 8 << 30, HostGBps: 25, DiskGBps: 5}} {
			s.Tiers = tiers
			r, a, err := simulateWith(reqs, cfg, s, true)
			require.NoError(t, err, s.Label())
			require.Equal(t, float64(hit)/prompt, r.PrefixHitRate, s.Label())
			dev := r.Tiers[0]
			require.Zero(t, dev.HitTokens, "%s: nothing of the prefix was left on every pool's device", s.Label())
			require.Equal(t, uint64(1), dev.Loads, "%s: request 4 loaded", s.Label())
			var lower, blocks uint64
			for _, tr := range r.Tiers[1:] {
				lower += tr.HitTokens
				blocks += tr.LoadedBlocks
			}
			require.Equal(t, uint64(hit), lower, "%s: the recompute the lower tiers saved", s.Label())
			// Uniform: four groups' 544-token blocks; per-class: one state block and 21
			// attention blocks of 16 (13 were on the device); carved: every group's units.
			require.Equal(t, map[string]uint64{LayoutUniform: 4, LayoutPerClass: 22, LayoutCarved: 135}[layout], blocks, s.Label())
			if tiers.DiskBytes > 0 {
				require.Len(t, r.Tiers, 3)
				require.Positive(t, r.Tiers[2].HitTokens, "%s: a 256 MiB host pushed some of the prefix to the disk", s.Label())
			} else {
				require.Len(t, r.Tiers, 2)
				require.Equal(t, uint64(hit), r.Tiers[1].HitTokens, s.Label())
			}
			want := map[string][]uint64{LayoutUniform: {hit}, LayoutPerClass: {hit, hit - 208}, LayoutCarved: {hit}}[layout]
			ha := a.(*hybridAlloc)
			require.Len(t, ha.pools, len(want))
			for i, p := range ha.pools {
				require.Equal(t, want[i], p.m.TierCounts().LoadedTokens, "%s: pool %d", s.Label(), i)
				require.Zero(t, p.m.TierCounts().LoadFailedTokens)
			}
		}
	}
}

// On the conversation workload the tiers' hit tokens are the Managers' own counts: the
// device's those of the device hits, the host's and the disk's together the tokens
// loaded, split between them by the blocks each served (a single pool, so that the
// device hit is the Manager's).
func TestHybridTierTokensAreTheManagersCounts(t *testing.T) {
	if raceEnabled {
		t.Skip("a single-goroutine replay: nothing for the race detector (kvinvariants runs it)")
	}
	w, err := LookupWorkload("conversation")
	require.NoError(t, err)
	n := 300
	if invariant.Enabled {
		n = 60
	}
	reqs := Prepare(w.Generate(n, 42), w.MaxModelLen).Requests
	cfg := DefaultConfig(24 << 10)
	cfg.MaxModelLen = w.MaxModelLen
	cfg.MaxNumBatchedTokens = max(cfg.MaxNumBatchedTokens, w.MaxModelLen)
	for _, tiers := range []Tiers{{HostBytes: 8 << 30}, {HostBytes: 1 << 30, DiskBytes: 8 << 30, HostGBps: 25, DiskGBps: 5}} {
		s := Scheme{Name: Hybrid, Model: "gpt-oss-20b", Layout: LayoutUniform, BlockSize: 16, PrefixSharing: true, Tiers: tiers}
		r, a, err := simulateWith(reqs, cfg, s, false)
		require.NoError(t, err, s.Label())
		p := a.(*hybridAlloc).pools[0].m
		require.Equal(t, p.Stats().HitTokens, r.Tiers[0].HitTokens, s.Label())
		var lower uint64
		for _, tr := range r.Tiers[1:] {
			if !invariant.Enabled { // 60 requests may not reach the disk
				require.Positive(t, tr.HitTokens, "%s: %s", s.Label(), tr.Medium)
			}
			lower += tr.HitTokens
		}
		require.Positive(t, lower)
		require.Equal(t, p.TierCounts().LoadedTokens, lower, s.Label())
		bare := s
		bare.Tiers = Tiers{}
		b, err := Simulate(reqs, cfg, bare)
		require.NoError(t, err)
		margin := 0.1 // 300 requests; 60 turn over less of the device
		if invariant.Enabled {
			margin = 0
		}
		require.Greater(t, r.PrefixHitRate, b.PrefixHitRate+margin, "%s: the tiers serve what the device evicted", s.Label())
	}
}

// Copies slower than the steps pin the pools' blocks: a request that cannot grow in one
// pool while copies are in flight stalls, its token held by the pools before it, and the
// run still ends with every request complete and every pool's books right.
func TestHybridSlowLinksStallNotFail(t *testing.T) {
	if raceEnabled {
		t.Skip("a single-goroutine replay: nothing for the race detector (kvinvariants runs it)")
	}
	w, err := LookupWorkload("conversation")
	require.NoError(t, err)
	reqs := Prepare(w.Generate(100, 42), w.MaxModelLen).Requests
	cfg := DefaultConfig(64 << 10)
	cfg.MaxModelLen = w.MaxModelLen
	cfg.MaxNumBatchedTokens = max(cfg.MaxNumBatchedTokens, w.MaxModelLen)
	s := Scheme{Name: Hybrid, Model: "jamba-1.5-mini", Layout: LayoutPerClass, BlockSize: 16, PrefixSharing: true,
		Tiers: Tiers{HostBytes: 8 << 30, HostGBps: 0.01}}
	r, a, err := simulateWith(reqs, cfg, s, true)
	require.NoError(t, err)
	ha := a.(*hybridAlloc)
	require.Len(t, ha.pools, 2)
	require.Empty(t, ha.running, "every request completed")
	for _, p := range ha.pools {
		require.Zero(t, p.m.Stats().Running)
		require.Zero(t, p.m.PendingTransfers())
	}
	t.Logf("stalls %v, link %.3f, wait per load %.1f", ha.stalls, r.Tiers[1].LinkUtilization, r.Tiers[0].MeanWaitPerLoad)
	require.Positive(t, ha.stalls[1], "a grow stalled past the first pool")
	require.Greater(t, r.Tiers[1].LinkUtilization, 0.5)
}

// Tiers the scheme cannot honour are refused, never ignored.
func TestTiersRefusedWhereNotHonoured(t *testing.T) {
	cfg := DefaultConfig(64 << 10)
	hy := Scheme{Name: Hybrid, Model: "jamba-1.5-mini", Layout: LayoutPerClass, BlockSize: 16, PrefixSharing: true}
	pg := Scheme{Name: Paged, BlockSize: 16, PrefixSharing: true}
	for name, s := range map[string]Scheme{
		"hybrid in blocks":       with(hy, Tiers{HostBlocks: 100}),
		"hybrid block bytes":     with(hy, Tiers{HostBytes: 1 << 30, BlockBytes: 1 << 20}),
		"hybrid unshared":        with(Scheme{Name: Hybrid, Model: "jamba-1.5-mini", Layout: LayoutUniform, BlockSize: 16}, Tiers{HostBytes: 1 << 30}),
		"hybrid disk, no host":   with(hy, Tiers{DiskBytes: 1 << 30}),
		"paged in bytes":         with(pg, Tiers{HostBytes: 1 << 30}),
		"paged blocks and bytes": with(pg, Tiers{HostBlocks: 10, HostBytes: 1 << 30}),
		"orca":                   with(Scheme{Name: OrcaMax}, Tiers{HostBytes: 1 << 30}),
	} {
		require.ErrorIs(t, s.validate(&cfg), ErrInvalidConfig, name)
	}
	// A host too small to give every pool a block is refused when the pools are built.
	reqs, small := evictedPrefixTrace()
	_, err := Simulate(reqs, small, with(Scheme{Name: Hybrid, Model: "qwen3-next-80b-a3b", Layout: LayoutPerClass, BlockSize: 16, PrefixSharing: true}, Tiers{HostBytes: 1 << 20}))
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "every pool needs one")
}

func with(s Scheme, t Tiers) Scheme {
	s.Tiers = t
	return s
}
