package sim

import (
	"fmt"
	"io"
	"strconv"

	"github.com/kvpage/kvpage/prefix"
)

// Lower tiers in the simulator. A scheme with prefix sharing (paged, or hybrid) can have
// host memory and disk below its device budget (prefix.WithTiers, hybrid.Config.Tiers):
// the device's evicted blocks go down (to the host as they are committed, write-through,
// so that no allocation waits; from the host to disk as the host evicts them,
// write-back), and an admission that finds its prefix below the device loads it instead
// of computing it. Every plan the simulated server executes succeeds, and takes the time
// its tier's bandwidth says on the step clock (tierlinks.go), so that a user can size
// host RAM, and its link, before buying them. Loaded tokens count as prefix hits
// (Result.PrefixHitRate): they are not computed.
//
// The hybrid scheme's tiers are sized in bytes, since its pools' blocks differ in size:
// each pool (hybridPool) gets the part of HostBytes and DiskBytes that its share of the
// device budget is (the per-class layout splits the device among its pools for
// max-model-len, sizing.CompareLayouts' split, and the host and disk the same way; the
// uniform and carved layouts have one pool, which takes them whole), in blocks of its own
// page bytes, which are its plans' block bytes.

// MaxTierBlocks bounds the blocks of a scheme's lower tiers together (host and disk; for
// the hybrid scheme, over all its pools): the simulator builds every tier's bookkeeping up
// front, about 250 bytes a block in the paged scheme's index at 16-token blocks (1.2 KB at
// 256) and 43 in the hybrid scheme's, so that 2^24 blocks take about 4 GB and 0.7 GB of
// the machine running it (a host of 2^30 blocks was killed for memory). It holds 32 TiB of
// Llama 3 8B's 16-token blocks. Larger tiers are refused with ErrInvalidConfig.
const MaxTierBlocks = 1 << 24

// TierBlocks returns the blocks bytes of host memory (or disk) holds when tp
// tensor-parallel GPUs share it and one GPU's shard of a block takes blockBytes: each GPU
// offloads its own shard of every block, so a block takes tp x blockBytes (as kvpage plan
// counts the host tier). The paged rows' HostBlocks and DiskBlocks (the kvpage command)
// and the hybrid scheme's pools' shares of HostBytes and DiskBytes are sized by it. It
// refuses with ErrInvalidConfig more blocks than MaxTierBlocks, a negative size, a block
// of no bytes and tp outside [1, 1024].
func TierBlocks(bytes, blockBytes int64, tp int) (int, error) {
	if bytes < 0 || blockBytes < 1 || tp < 1 || tp > maxTensorParallel {
		return 0, fmt.Errorf("%w: %d bytes in blocks of %d bytes on each of %d GPUs", ErrInvalidConfig, bytes, blockBytes, tp)
	}
	n := bytes / blockBytes / int64(tp) // floor(bytes / (blockBytes x tp)), without the product's overflow
	if n > MaxTierBlocks {
		return 0, tooManyTierBlocks(n, fmt.Sprintf("%d bytes in blocks of %d bytes on each of %d GPUs", bytes, blockBytes, tp))
	}
	return int(n), nil
}

// tooManyTierBlocks is the refusal of lower tiers of n blocks, made from what sizes says.
func tooManyTierBlocks(n int64, sizes string) error {
	return fmt.Errorf("%w: %s make %d lower-tier blocks, above the simulator's limit of %d (sim.MaxTierBlocks), whose bookkeeping it builds up front",
		ErrInvalidConfig, sizes, n, MaxTierBlocks)
}

// Tiers configures a scheme's lower tiers. A link (HostGBps, DiskGBps) or BlockBytes
// given without its tier is harmless and ignored: it times and sizes nothing, and the row
// is the row without that tier, label and figures alike. A sweep over tier sizes may keep
// them in its row of size 0, the baseline. A disk without a host is refused: it would
// hold blocks.
type Tiers struct {
	// HostBlocks and DiskBlocks are the paged scheme's tiers' capacities in blocks of its
	// block size (0: no such tier; disk needs host).
	HostBlocks, DiskBlocks int
	// HostBytes and DiskBytes are the hybrid scheme's tiers' sizes in bytes, split across
	// its pools in proportion to their device budgets (see above; 0: no such tier; disk
	// needs host).
	HostBytes, DiskBytes int64
	// HostGBps and DiskGBps are the tiers' links in GB/s (10^9 bytes): the host's to the
	// device, the disk's to the device and the host. They time the copies (tierlinks.go)
	// and TransferSeconds; 0 is an unlimited link, copies confirmed at once.
	HostGBps, DiskGBps float64
	// BlockBytes is the paged scheme's block's KV in bytes (the model's bytes per token x
	// block size). The hybrid scheme's blocks are its model's pages: it takes none.
	BlockBytes int64
}

func (t Tiers) enabled() bool { return t.HostBlocks > 0 || t.HostBytes > 0 }

// inBytes reports whether t is sized in bytes (the hybrid scheme's way).
func (t Tiers) inBytes() bool { return t.HostBytes > 0 || t.DiskBytes > 0 }

func (t Tiers) label() string {
	switch {
	case !t.enabled():
		return ""
	case t.inBytes() && t.DiskBytes > 0:
		return fmt.Sprintf(" host=%s disk=%s", gib(t.HostBytes), gib(t.DiskBytes))
	case t.inBytes():
		return " host=" + gib(t.HostBytes)
	case t.DiskBlocks > 0:
		return fmt.Sprintf(" host=%d disk=%d", t.HostBlocks, t.DiskBlocks)
	}
	return fmt.Sprintf(" host=%d", t.HostBlocks)
}

func (t Tiers) validate() error {
	if t.HostBlocks < 0 || t.DiskBlocks < 0 || t.HostBytes < 0 || t.DiskBytes < 0 || t.BlockBytes < 0 || !(t.HostGBps >= 0) || !(t.DiskGBps >= 0) {
		return fmt.Errorf("%w: tiers %+v", ErrInvalidConfig, t)
	}
	if n := int64(t.HostBlocks) + int64(t.DiskBlocks); n > MaxTierBlocks {
		return tooManyTierBlocks(n, fmt.Sprintf("tiers of %d host and %d disk blocks (HostBlocks, DiskBlocks; --host-ram, --disk)", t.HostBlocks, t.DiskBlocks))
	}
	if (t.DiskBlocks > 0 && t.HostBlocks == 0) || (t.DiskBytes > 0 && t.HostBytes == 0) {
		return fmt.Errorf("%w: tiers %+v: the disk tier lies below the host's, and needs one", ErrInvalidConfig, t)
	}
	if t.inBytes() && (t.HostBlocks > 0 || t.DiskBlocks > 0) {
		return fmt.Errorf("%w: tiers %+v: sized in blocks and in bytes at once", ErrInvalidConfig, t)
	}
	return nil
}

// validateFor checks t against scheme s: tiers need prefix sharing, the paged scheme
// takes them in blocks and the hybrid scheme in bytes; no other scheme takes any.
func (t Tiers) validateFor(s *Scheme) error {
	if !t.enabled() { // validate refused a disk without a host
		return nil
	}
	switch {
	case !s.PrefixSharing || (s.Name != Paged && s.Name != Hybrid):
		return fmt.Errorf("%w: %s: lower tiers need the paged or hybrid scheme with prefix sharing", ErrInvalidConfig, s.Label())
	case s.Name == Paged && t.inBytes():
		return fmt.Errorf("%w: %s: the paged scheme's tiers are sized in blocks (HostBlocks, DiskBlocks), not bytes", ErrInvalidConfig, s.Label())
	case s.Name == Hybrid && (t.HostBlocks > 0 || t.BlockBytes > 0):
		return fmt.Errorf("%w: %s: the hybrid scheme's tiers are sized in bytes (HostBytes, DiskBytes), split across its pools, whose blocks are the model's pages", ErrInvalidConfig, s.Label())
	}
	return nil
}

// tierConfig is the index's tier configuration: host blocks written through from the
// device, disk blocks written back from the host, of blockBytes each.
func tierConfig(host, disk int, blockBytes int64) prefix.TierConfig {
	c := prefix.TierConfig{BlockBytes: blockBytes}
	c.Tiers = append(c.Tiers, prefix.TierSpec{Medium: prefix.MediumCPU, Capacity: host, Write: prefix.WriteThrough})
	if disk > 0 {
		c.Tiers = append(c.Tiers, prefix.TierSpec{Medium: prefix.MediumDisk, Capacity: disk, Write: prefix.WriteBack})
	}
	return c
}

// TierResult is one tier's figures over a whole run.
type TierResult struct {
	// Medium is the tier's: GPU for the device, CPU for the host, DISK.
	Medium string `json:"medium"`
	// CapacityBlocks is the tier's size in blocks (the hybrid scheme's: summed over its
	// pools, whose blocks differ in size), CapacityBytes in bytes (0 for the paged scheme
	// without BlockBytes).
	CapacityBlocks int   `json:"capacity_blocks"`
	CapacityBytes  int64 `json:"capacity_bytes"`
	// HitRate is the prompt tokens found in this tier (the device's prefix, or loaded
	// from the tier) over all prompt tokens of the run's first admissions (readmissions
	// after preemption are apart, as in Result.PrefixHitRate). HitTokens is its
	// numerator: for a lower tier the tokens loaded instead of computed, the recompute it
	// saved. The hybrid scheme counts a token of its prompt once, where its pools found it
	// (blocks summed over groups are not tokens): on the device if every pool's device
	// hit covers it, else loaded, from the host and disk in proportion to the blocks every
	// pool loaded from each.
	HitRate   float64 `json:"hit_rate"`
	HitTokens uint64  `json:"hit_tokens"`
	// StoredBlocks are blocks copied into the tier, LoadedBlocks blocks loaded from it.
	StoredBlocks uint64 `json:"stored_blocks"`
	LoadedBlocks uint64 `json:"loaded_blocks"`
	// BytesIn and BytesOut are the bytes copied into and out of the tier.
	BytesIn  uint64 `json:"bytes_in"`
	BytesOut uint64 `json:"bytes_out"`
	// Plans counts the transfer plans that copied into the tier.
	Plans uint64 `json:"plans"`
	// TransferSeconds is (BytesIn + BytesOut) at the tier's bandwidth (0 for the device
	// or without one).
	TransferSeconds float64 `json:"transfer_seconds"`
	// LinkUtilization is, for a lower tier with a bandwidth, the part of the run's steps
	// its link spent copying (tierlinks.go); 0 for the device or an unlimited link.
	LinkUtilization float64 `json:"link_utilization"`
	// For the device only: Loads counts the admissions that loaded blocks from a lower
	// tier, and MeanLoadWaitSteps is the steps an admission waited for its load before
	// decoding, over every admission of the run (readmissions included; 0 with unlimited
	// links), MeanWaitPerLoad the same over the admissions that loaded.
	Loads             uint64  `json:"loads,omitempty"`
	MeanLoadWaitSteps float64 `json:"mean_load_wait_steps"`
	MeanWaitPerLoad   float64 `json:"mean_wait_per_load_steps"`
}

// tierAllocator is an allocator that can have lower tiers (the paged and hybrid schemes):
// the scheduler moves its transfer clock (tierlinks.go) at the start of every step, and
// drains it at the end of the run. Without tiers the clock has nothing to do and
// tierResults is nil.
type tierAllocator interface {
	transfers() *tierClock
	tierResults(totalSteps int) []TierResult
}

func (p *paged) transfers() *tierClock { return &p.clock }

func (p *paged) tierResults(totalSteps int) []TierResult {
	if !p.tiers.enabled() {
		return nil
	}
	x := p.m.Config().Index
	prompt := p.m.Stats().PromptTokens // the Manager counts Resumed lookups apart, hits per tier too
	out := make([]TierResult, 0, x.NumTiers())
	for t := range x.NumTiers() {
		st := x.TierStatsOf(prefix.Tier(t))
		r := TierResult{StoredBlocks: st.Stored, LoadedBlocks: st.Loaded, BytesIn: st.BytesIn, BytesOut: st.BytesOut, Plans: st.Plans,
			HitTokens: st.HitBlocks * uint64(p.blockSize)}
		switch t {
		case 0:
			r.CapacityBlocks = p.pool.Capacity()
		case 1:
			r.CapacityBlocks = p.tiers.HostBlocks
		default:
			r.CapacityBlocks = p.tiers.DiskBlocks
		}
		r.CapacityBytes = int64(r.CapacityBlocks) * p.tiers.BlockBytes
		out = append(out, r)
	}
	finishTiers(out, p.tiers, &p.clock, prompt, totalSteps)
	return out
}

// finishTiers fills in what every scheme's tier figures share: each tier's medium, hit
// rate over prompt tokens (the first admissions'), transfer time and link use, and the
// device's load waits.
func finishTiers(out []TierResult, tiers Tiers, c *tierClock, prompt uint64, totalSteps int) {
	for t := range out {
		r := &out[t]
		gbps := 0.0
		switch t {
		case 0:
			r.Medium = prefix.MediumGPU
			c.deviceWaits(r)
		case 1:
			r.Medium, gbps = prefix.MediumCPU, tiers.HostGBps
		default:
			r.Medium, gbps = prefix.MediumDisk, tiers.DiskGBps
		}
		if prompt > 0 {
			r.HitRate = float64(r.HitTokens) / float64(prompt)
		}
		if gbps > 0 {
			r.TransferSeconds = float64(r.BytesIn+r.BytesOut) / (gbps * 1e9)
		}
		r.LinkUtilization = c.utilization(t, totalSteps)
	}
}

// writeTiers writes, for rows with lower tiers, each tier's hit rate, blocks and bytes
// moved and plans.
func writeTiers(w io.Writer, results []*Result, width int) error {
	first := true
	for _, r := range results {
		if len(r.Tiers) == 0 {
			continue
		}
		if first {
			if _, err := fmt.Fprintf(w, "\ntiers (whole run): hit rate per tier, blocks stored / loaded, bytes in / out, plans, transfer time, link busy; load wait in steps per admission (per load)\n"); err != nil {
				return err
			}
			first = false
		}
		line := fmt.Sprintf("%-*s", width, r.Scheme.Label())
		for _, t := range r.Tiers {
			line += fmt.Sprintf("  %s %5.1f%%", t.Medium, 100*t.HitRate)
			if t.Medium != prefix.MediumGPU {
				line += fmt.Sprintf(" %d/%d blk %s/%s %d plans", t.StoredBlocks, t.LoadedBlocks, byteSize(t.BytesIn), byteSize(t.BytesOut), t.Plans)
				if t.TransferSeconds > 0 {
					line += fmt.Sprintf(" %.1fs", t.TransferSeconds)
				}
				if t.LinkUtilization > 0 {
					line += fmt.Sprintf(" link %.1f%%", 100*t.LinkUtilization)
				}
			}
		}
		if d := r.Tiers[0]; d.MeanLoadWaitSteps > 0 {
			line += fmt.Sprintf("  wait %.3f (%.2f)", d.MeanLoadWaitSteps, d.MeanWaitPerLoad)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

// gib prints bytes in GiB, as the flags that give them are usually written (8GiB).
func gib(b int64) string { return strconv.FormatFloat(float64(b)/(1<<30), 'f', -1, 64) + "GiB" }

// byteSize prints bytes in GB (10^9) with one decimal, or MB below a GB.
func byteSize(b uint64) string {
	if b >= 1e9 {
		return fmt.Sprintf("%.1fGB", float64(b)/1e9)
	}
	return fmt.Sprintf("%.1fMB", float64(b)/1e6)
}
