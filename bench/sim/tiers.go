package sim

import (
	"fmt"
	"io"

	"github.com/kvpage/kvpage/prefix"
)

// Lower tiers in the simulator. A paged scheme with prefix sharing can have host memory
// and disk below its device budget (prefix.WithTiers): the device's evicted blocks go
// down (to the host as they are committed, write-through, so that no allocation waits;
// from the host to disk as the host evicts them, write-back), and an admission that
// finds its prefix below the device loads it instead of computing it. Every plan the
// simulated server executes succeeds, and takes the time its tier's bandwidth says on
// the step clock (tierlinks.go), so that a user can size host RAM, and its link, before
// buying them. Loaded tokens count as prefix hits (Result.PrefixHitRate): they are not
// computed.

// Tiers configures a scheme's lower tiers.
type Tiers struct {
	// HostBlocks and DiskBlocks are the tiers' capacities in blocks of the scheme's block
	// size (0: no such tier; disk needs host).
	HostBlocks, DiskBlocks int
	// HostGBps and DiskGBps are the tiers' links in GB/s (10^9 bytes): the host's to the
	// device, the disk's to the device and the host. They time the copies (tierlinks.go)
	// and TransferSeconds; 0 is an unlimited link, copies confirmed at once.
	HostGBps, DiskGBps float64
	// BlockBytes is one block's KV in bytes (the model's bytes per token x block size).
	BlockBytes int64
}

func (t Tiers) enabled() bool { return t.HostBlocks > 0 }

func (t Tiers) label() string {
	switch {
	case !t.enabled():
		return ""
	case t.DiskBlocks > 0:
		return fmt.Sprintf(" host=%d disk=%d", t.HostBlocks, t.DiskBlocks)
	}
	return fmt.Sprintf(" host=%d", t.HostBlocks)
}

func (t Tiers) validate() error {
	if t.HostBlocks < 0 || t.DiskBlocks < 0 || t.HostBlocks > prefix.MaxTierCapacity || t.DiskBlocks > prefix.MaxTierCapacity ||
		t.BlockBytes < 0 || !(t.HostGBps >= 0) || !(t.DiskGBps >= 0) || (t.DiskBlocks > 0 && t.HostBlocks == 0) {
		return fmt.Errorf("%w: tiers %+v", ErrInvalidConfig, t)
	}
	return nil
}

// config is the index's tier configuration for a device of deviceBlocks usable blocks.
func (t Tiers) config(deviceBlocks int) prefix.TierConfig {
	c := prefix.TierConfig{BlockBytes: t.BlockBytes}
	c.Tiers = append(c.Tiers, prefix.TierSpec{Medium: prefix.MediumCPU, Capacity: t.HostBlocks, Write: prefix.WriteThrough})
	if t.DiskBlocks > 0 {
		c.Tiers = append(c.Tiers, prefix.TierSpec{Medium: prefix.MediumDisk, Capacity: t.DiskBlocks, Write: prefix.WriteBack})
	}
	return c
}

// TierResult is one tier's figures over a whole run.
type TierResult struct {
	// Medium is the tier's: GPU for the device, CPU for the host, DISK.
	Medium string `json:"medium"`
	// CapacityBlocks is the tier's size in blocks.
	CapacityBlocks int `json:"capacity_blocks"`
	// HitRate is the prompt tokens found in this tier (the device's prefix, or loaded
	// from the tier) over all prompt tokens of the run's first admissions (readmissions
	// after preemption are apart, as in Result.PrefixHitRate).
	HitRate float64 `json:"hit_rate"`
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

// tierAllocator is an allocator with lower tiers (the paged scheme with Tiers): the
// scheduler moves its transfer clock (tierlinks.go) at the start of every step, and
// drains it at the end of the run.
type tierAllocator interface {
	advance(step int) error
	copying() bool
	drain() error
	tierResults(totalSteps int) []TierResult
}

func (p *paged) tierResults(totalSteps int) []TierResult {
	if !p.tiers.enabled() {
		return nil
	}
	x := p.m.Config().Index
	prompt := p.m.Stats().PromptTokens // the Manager counts Resumed lookups apart, hits per tier too
	var out []TierResult
	for t := range x.NumTiers() {
		st := x.TierStatsOf(prefix.Tier(t))
		r := TierResult{StoredBlocks: st.Stored, LoadedBlocks: st.Loaded, BytesIn: st.BytesIn, BytesOut: st.BytesOut, Plans: st.Plans}
		gbps := 0.0
		switch t {
		case 0:
			r.Medium, r.CapacityBlocks = prefix.MediumGPU, p.pool.Capacity()
			if c := &p.clock; c.loads > 0 {
				r.Loads = uint64(c.loads)
				r.MeanLoadWaitSteps = float64(c.waited) / float64(c.admissions)
				r.MeanWaitPerLoad = float64(c.waited) / float64(c.loads)
			}
		case 1:
			r.Medium, r.CapacityBlocks, gbps = prefix.MediumCPU, p.tiers.HostBlocks, p.tiers.HostGBps
		default:
			r.Medium, r.CapacityBlocks, gbps = prefix.MediumDisk, p.tiers.DiskBlocks, p.tiers.DiskGBps
		}
		if prompt > 0 {
			r.HitRate = float64(st.HitBlocks) * float64(p.blockSize) / float64(prompt)
		}
		if gbps > 0 {
			r.TransferSeconds = float64(st.BytesIn+st.BytesOut) / (gbps * 1e9)
		}
		r.LinkUtilization = p.clock.utilization(t, totalSteps)
		out = append(out, r)
	}
	return out
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

// byteSize prints bytes in GB (10^9) with one decimal, or MB below a GB.
func byteSize(b uint64) string {
	if b >= 1e9 {
		return fmt.Sprintf("%.1fGB", float64(b)/1e9)
	}
	return fmt.Sprintf("%.1fMB", float64(b)/1e6)
}
