package bench

import (
	"testing"
	"time"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocks/sizing"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// W5 (bench/README.md, "W5: W3 with a host tier"): W3's trace and steps on a device pool
// too small for W3's 32 system prompts (4,096 blocks), with a host tier that holds them.
const (
	// W5DeviceBlocks is W5's device pool, the null block included (2,047 usable).
	W5DeviceBlocks = 2048
	// W5HostBlocks is W5's host tier in blocks: the 32 system prompts' 4,096 blocks.
	W5HostBlocks = 4096
	// W5StoreHits is the host tier's write policy: a block is copied to the host once it
	// has been hit twice on the device (vLLM's store threshold), so that the requests'
	// unique tails, never hit again, are never copied.
	W5StoreHits = 2
)

// w5BlockBytes is one block's KV for llama-3-8b in bf16 (16 tokens x 128 KiB): 2 MiB.
func w5BlockBytes(tb testing.TB) int64 {
	m, err := sizing.ModelPreset("llama-3-8b")
	require.NoError(tb, err)
	bits, err := m.KVBitsPerToken(sizing.BF16)
	require.NoError(tb, err)
	return bits.CeilBytes() * BlockSize
}

// w5Manager builds W5's stack: a device pool of 2,048 blocks with the null block, the
// prefix index with LRU, and, when tiered, a host tier of 4,096 blocks (LRU, written
// after 2 hits); the Manager over them.
func w5Manager(tb testing.TB, tiered bool) *blocktable.Manager {
	pool, err := blocks.New(W5DeviceBlocks, blocks.WithNullBlock())
	require.NoError(tb, err)
	var opts []prefix.Option
	if tiered {
		opts = append(opts, prefix.WithTiers(prefix.TierConfig{
			Tiers:      []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: W5HostBlocks, Write: prefix.WriteAfterHits, Hits: W5StoreHits}},
			BlockBytes: w5BlockBytes(tb),
		}))
	}
	x, err := prefix.New(pool, BlockSize, opts...)
	require.NoError(tb, err)
	m, err := blocktable.New(blocktable.Config{Pool: pool, Index: x, BlockSize: BlockSize})
	require.NoError(tb, err)
	return m
}

// w5Result is what one W5 run reports.
type w5Result struct {
	HitTokens, LoadedTokens, PromptTokens uint64
	Evictions                             uint64
	Stored, Loaded                        uint64 // blocks copied to and from the host
	Plans                                 uint64
	LoadPlans                             uint64 // plans into the device: one per load from one tier
	BytesMoved                            uint64
}

func (r w5Result) DeviceHitRate() float64 { return float64(r.HitTokens) / float64(r.PromptTokens) }
func (r w5Result) TieredHitRate() float64 {
	return float64(r.HitTokens+r.LoadedTokens) / float64(r.PromptTokens)
}

// runW5 is runW3 with a server that executes every plan at once and confirms it ok: after
// each admission (the request's load, and the stores its hits started) it takes the
// plans and completes them before the request's first step. Without tiers it is runW3.
func runW5(m *blocktable.Manager, tr *W3Trace, plans []prefix.Plan) (w5Result, error) {
	req := blocktable.Request{MaxTokens: W3SystemTokens + W3UniqueTokens + W3OutputTokens}
	for i := range tr.Requests {
		rq := &tr.Requests[i]
		seq := blocktable.SeqID(i)
		req.Prompt = rq.Prompt
		if _, err := m.Admit(seq, &req); err != nil {
			return w5Result{}, err
		}
		plans = m.TakePlans(plans[:0])
		for j, p := range plans {
			if j > 0 && plans[j-1].ID == p.ID {
				continue
			}
			if _, err := m.CompleteTransfer(p.ID, true); err != nil {
				return w5Result{}, err
			}
		}
		if err := decodeAndFinish(m, seq, rq.Output); err != nil {
			return w5Result{}, err
		}
	}
	return w5Read(m), nil
}

// w5Read reads a finished W5 run's figures off its Manager and index.
func w5Read(m *blocktable.Manager) w5Result {
	st := m.Stats()
	x := m.Config().Index
	host := x.TierStatsOf(1)
	return w5Result{
		HitTokens: st.HitTokens, LoadedTokens: st.LoadedTokens, PromptTokens: st.PromptTokens, Evictions: st.Evictions,
		Stored: host.Stored, Loaded: host.Loaded, Plans: host.Plans + x.TierStatsOf(prefix.Device).Plans,
		LoadPlans: x.TierStatsOf(prefix.Device).Plans, BytesMoved: host.BytesIn + host.BytesOut,
	}
}

// TestW5HostTier pins W5's figures (deterministic: logical clocks, ties by ID): the
// device-only hit rate, the tiered run's device and host hits, blocks moved and bytes.
func TestW5HostTier(t *testing.T) {
	if invariant.Enabled {
		t.Skip("two whole traces under invariant checks take minutes; the plain build runs them")
	}
	tr := NewW3Trace()
	dev, err := runW5(w5Manager(t, false), tr, nil)
	require.NoError(t, err)
	m := w5Manager(t, true)
	tiered, err := runW5(m, tr, nil)
	require.NoError(t, err)
	t.Logf("device-only %+v hit %.5f", dev, dev.DeviceHitRate())
	t.Logf("tiered %+v device hit %.5f tiered hit %.5f", tiered, tiered.DeviceHitRate(), tiered.TieredHitRate())
	require.Equal(t, uint64(W3Requests*(W3SystemTokens+W3UniqueTokens)), dev.PromptTokens)
	require.Zero(t, dev.LoadedTokens)
	require.Greater(t, tiered.TieredHitRate(), dev.DeviceHitRate())
	requireW5Tiered(t, m, dev, tiered)
}

// TestW5HostTierLagged: with the server confirming each transfer 2 scheduler steps after
// taking it (runW5Lagged), W5's figures are exactly the instant server's: a request waits
// for its load (2 idle steps per load) and the stores its hits start complete during its
// decode, long before the next request, which is admitted 128 steps later.
func TestW5HostTierLagged(t *testing.T) {
	if invariant.Enabled {
		t.Skip("two whole traces under invariant checks take minutes; the plain build runs them")
	}
	tr := NewW3Trace()
	dev, waits, err := runW5Lagged(w5Manager(t, false), tr, W5LagSteps)
	require.NoError(t, err)
	require.Zero(t, waits, "device-only: nothing to wait for")
	m := w5Manager(t, true)
	tiered, waits, err := runW5Lagged(m, tr, W5LagSteps)
	require.NoError(t, err)
	require.Equal(t, uint64(W5LagSteps)*tiered.LoadPlans, waits, "each load waits the lag")
	requireW5Tiered(t, m, dev, tiered)
}

// requireW5Tiered checks a W5 pair of runs against W5's check values (bench/README.md).
func requireW5Tiered(t *testing.T, m *blocktable.Manager, dev, tiered w5Result) {
	t.Helper()
	require.Equal(t, tiered.LoadedTokens, tiered.Loaded*BlockSize, "every loaded block was a hit")
	require.Equal(t, (tiered.Stored+tiered.Loaded)*uint64(w5BlockBytes(t)), tiered.BytesMoved)
	require.Zero(t, m.Config().Index.PendingTransfers())
	st := m.Stats()
	require.Equal(t, st.Capacity, st.Free+st.Evictable, "every device block is free or cached and evictable")
	require.NoError(t, m.CheckInvariants())
	require.NoError(t, m.Config().Index.CheckInvariants())
	require.Equal(t, w5Figures{
		DeviceOnlyHitTokens: 27244208, DeviceOnlyEvictions: 1655190,
		HitTokens: 27244208, LoadedTokens: 13379200, Evictions: 1655190,
		Stored: 4096, Loaded: 836200, Plans: 6738,
	}, w5Figures{
		DeviceOnlyHitTokens: dev.HitTokens, DeviceOnlyEvictions: dev.Evictions,
		HitTokens: tiered.HitTokens, LoadedTokens: tiered.LoadedTokens, Evictions: tiered.Evictions,
		Stored: tiered.Stored, Loaded: tiered.Loaded, Plans: tiered.Plans,
	})
}

// w5Figures are W5's check values (bench/README.md).
type w5Figures struct {
	DeviceOnlyHitTokens, DeviceOnlyEvictions uint64
	HitTokens, LoadedTokens, Evictions       uint64
	Stored, Loaded, Plans                    uint64
}

// BenchmarkW5HostTier is W5 (bench/README.md): W3's trace on a 2,048-block device, once
// device-only and once with the 4,096-block host tier, the server confirming every plan at
// once; then both again with the lagged server (runW5Lagged: each transfer confirmed 2
// scheduler steps after its plan was taken, a request waiting for its load). It reports
// both hit rates, the recompute tokens the host tier saves, the blocks moved, and req/s
// of each run, wall clock and per CPU-second: their ratio is the cost of tiering on the
// scheduler thread.
func BenchmarkW5HostTier(b *testing.B) {
	tr := NewW3Trace()
	for _, c := range []struct {
		name   string
		tiered bool
		lag    int // 0: the instant server (runW5)
	}{{"device-only", false, 0}, {"host-tier", true, 0}, {"lagged/device-only", false, W5LagSteps}, {"lagged/host-tier", true, W5LagSteps}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var res w5Result
			var waits uint64
			var cpu time.Duration
			plans := make([]prefix.Plan, 0, 16)
			for b.Loop() {
				b.StopTimer()
				m := w5Manager(b, c.tiered)
				b.StartTimer()
				start := cpuTime()
				var err error
				if c.lag == 0 {
					res, err = runW5(m, tr, plans)
				} else {
					res, waits, err = runW5Lagged(m, tr, c.lag)
				}
				if err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - start
			}
			b.ReportMetric(float64(W3Requests)*float64(b.N)/b.Elapsed().Seconds(), "req/s")
			if cpu > 0 {
				// CPU time (getrusage) counts only the time the process ran: on a loaded
				// machine it is the figure to compare (see pool_cputime_test.go).
				b.ReportMetric(float64(W3Requests)*float64(b.N)/cpu.Seconds(), "cpu-req/s")
			}
			b.ReportMetric(res.DeviceHitRate(), "device-hit-rate")
			b.ReportMetric(res.TieredHitRate(), "hit-rate")
			b.ReportMetric(float64(res.LoadedTokens), "recompute-tokens-saved")
			b.ReportMetric(float64(res.Stored+res.Loaded), "blocks-moved")
			b.ReportMetric(float64(res.Evictions), "evictions")
			if c.lag > 0 {
				b.ReportMetric(float64(waits), "load-wait-steps")
			}
		})
	}
}
