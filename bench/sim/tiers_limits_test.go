package sim

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
)

// TierBlocks counts a block as tp shards of blockBytes, and refuses past MaxTierBlocks,
// or nonsense, with ErrInvalidConfig naming the limit.
func TestTierBlocks(t *testing.T) {
	for _, tc := range []struct {
		bytes, block int64
		tp           int
		want         int
		refused      string
	}{
		{8 << 30, 2 << 20, 1, 4096, ""},
		{8 << 30, 1 << 20, 2, 4096, ""},
		{8<<30 - 1, 1 << 20, 2, 4095, ""},
		{0, 1 << 20, 1, 0, ""},
		{MaxTierBlocks << 10, 1 << 10, 1, MaxTierBlocks, ""},
		{MaxTierBlocks<<10 + 1<<10, 1 << 10, 1, 0, "above the simulator's limit of 16777216 (sim.MaxTierBlocks)"},
		{math.MaxInt64, 1 << 20, 1024, 0, "sim.MaxTierBlocks"},
		{-1, 1 << 20, 1, 0, "-1 bytes"},
		{1 << 30, 0, 1, 0, "blocks of 0 bytes"},
		{1 << 30, 1 << 20, 0, 0, "0 GPUs"},
		{1 << 30, 1 << 20, 1025, 0, "1025 GPUs"},
	} {
		n, err := TierBlocks(tc.bytes, tc.block, tc.tp)
		if tc.refused != "" {
			require.ErrorIs(t, err, ErrInvalidConfig, "%+v", tc)
			require.ErrorContains(t, err, tc.refused)
			continue
		}
		require.NoError(t, err, "%+v", tc)
		require.Equal(t, tc.want, n, "%+v", tc)
	}
}

// Lower tiers past MaxTierBlocks are refused by Validate and Simulate with
// ErrInvalidConfig naming the limit and the flags, before anything is built. A huge
// --host-ram on the per-class layout used to build a host tier of 2^30 blocks (a run
// killed for memory), and MaxInt64 bytes for both host and disk, capped per tier at
// prefix.MaxTierCapacity, were refused by the index with a prefix.SizeError, which is no
// ErrInvalidConfig.
func TestTierSizesPastTheLimitAreInvalidConfig(t *testing.T) {
	reqs, cfg := evictedPrefixTrace()
	paged := func(host, disk int) Scheme {
		return Scheme{Name: Paged, BlockSize: 16, PrefixSharing: true, Tiers: Tiers{HostBlocks: host, DiskBlocks: disk, BlockBytes: 1 << 20}}
	}
	hybrid := func(layout string, host, disk int64) Scheme {
		return Scheme{Name: Hybrid, Model: "qwen3-next-80b-a3b", Layout: layout, BlockSize: 16, PrefixSharing: true,
			Tiers: Tiers{HostBytes: host, DiskBytes: disk}}
	}
	for name, s := range map[string]Scheme{
		"paged, host past the limit":                          paged(MaxTierBlocks+1, 0),
		"paged, host and disk past it together":               paged(MaxTierBlocks/2+1, MaxTierBlocks/2),
		"paged, both at prefix.MaxTierCapacity":               paged(prefix.MaxTierCapacity, prefix.MaxTierCapacity),
		"hybrid uniform, MaxInt64 host and disk":              hybrid(LayoutUniform, math.MaxInt64, math.MaxInt64),
		"hybrid per-class, a 1 PiB host":                      hybrid(LayoutPerClass, 1<<50, 0),
		"hybrid per-class, MaxInt64 host":                     hybrid(LayoutPerClass, math.MaxInt64, 0),
		"hybrid carved, a host and a disk past it":            hybrid(LayoutCarved, 1<<50, 1<<50),
		"hybrid per-class, a disk alone past it":              hybrid(LayoutPerClass, 8<<30, 1<<55),
		"hybrid uniform, host and disk past it only together": hybrid(LayoutUniform, 13369344*(MaxTierBlocks/2+1), 13369344*(MaxTierBlocks/2)),
	} {
		t.Run(name, func(t *testing.T) {
			check := func(err error) {
				t.Helper()
				require.ErrorIs(t, err, ErrInvalidConfig)
				var se *prefix.SizeError
				require.False(t, errors.As(err, &se), "%v", err)
				require.ErrorContains(t, err, "sim.MaxTierBlocks")
				require.ErrorContains(t, err, "--host-ram")
			}
			check(s.Validate(&cfg)) // refused before anything is built: the 1 PiB host would take 43 GB
			_, err := Simulate(reqs, cfg, s)
			check(err)
		})
	}
	// At the limit is valid (not built here: 4 GB).
	require.NoError(t, paged(MaxTierBlocks/2, MaxTierBlocks/2).Validate(&cfg))
	require.NoError(t, paged(MaxTierBlocks, 0).Validate(&cfg))
}

// A link (HostGBps, DiskGBps) or BlockBytes without its tier times and sizes nothing: the
// row is the row without tiers, label and figures alike (see Tiers), which is why
// validate accepts them.
func TestTierLinksWithoutATierAreHarmless(t *testing.T) {
	reqs, cfg := evictedPrefixTrace()
	for _, s := range []Scheme{
		{Name: Paged, BlockSize: 16, PrefixSharing: true},
		{Name: Hybrid, Model: "qwen3-next-80b-a3b", Layout: LayoutPerClass, BlockSize: 16, PrefixSharing: true},
	} {
		with := s
		with.Tiers = Tiers{HostGBps: 8, DiskGBps: 2, BlockBytes: 1 << 20}
		if s.Name == Hybrid {
			with.Tiers.BlockBytes = 0 // the hybrid scheme refuses BlockBytes with a host; without one, as harmless
			require.NoError(t, Scheme{Name: Hybrid, Model: s.Model, Layout: s.Layout, BlockSize: 16, PrefixSharing: true,
				Tiers: Tiers{BlockBytes: 1 << 20}}.Validate(&cfg))
		}
		require.NoError(t, with.Validate(&cfg))
		require.Equal(t, s.Label(), with.Label())
		want, err := Simulate(reqs, cfg, s)
		require.NoError(t, err)
		got, err := Simulate(reqs, cfg, with)
		require.NoError(t, err)
		require.Nil(t, got.Tiers)
		got.Scheme = want.Scheme
		require.Equal(t, want, got, s.Label())
	}
}

// BenchmarkTierBookkeeping measures what MaxTierBlocks bounds: the heap a lower tier of
// 2^20 blocks takes once built, before anything is stored, per block, in the paged
// scheme's index (16- and 256-token blocks) and in a hybrid Manager (one full-attention
// group).
//
//	go test -run '^$' -bench TierBookkeeping -benchtime 1x ./bench/sim/
func BenchmarkTierBookkeeping(b *testing.B) {
	const n = 1 << 20
	heap := func(build func() any) float64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := build()
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(x)
		return float64(after.HeapAlloc-before.HeapAlloc) / n
	}
	for _, bs := range []int{16, 256} {
		b.Run(fmt.Sprintf("paged/%d", bs), func(b *testing.B) {
			var per float64
			for range b.N {
				per = heap(func() any {
					pool, err := blocks.New(1024)
					require.NoError(b, err)
					x, err := prefix.New(pool, bs, prefix.WithTiers(tierConfig(n, 0, 1<<20)))
					require.NoError(b, err)
					return x
				})
			}
			b.ReportMetric(per, "bytes/block")
		})
	}
	b.Run("hybrid", func(b *testing.B) {
		var per float64
		for range b.N {
			per = heap(func() any {
				tc := tierConfig(n, 0, 1<<20)
				m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{hybrid.FullAttention{Block: 16, Bytes: 1 << 20}}, NumBlocks: 1024, Tiers: &tc})
				require.NoError(b, err)
				return m
			})
		}
		b.ReportMetric(per, "bytes/block")
	})
}
