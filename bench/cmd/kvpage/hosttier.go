package main

import (
	"fmt"
	"io"

	"github.com/kvpage/kvpage/blocks/sizing"
)

// hostTier is what --host-ram holds as a KV tier below the GPUs (prefix.WithTiers): each
// GPU's pool offloads its own shard of every block, so a block takes the whole model's
// bytes per block in host memory (per-GPU bytes x tensor-parallel size).
type hostTier struct {
	HostRAMBytes  int64 `json:"host_ram_bytes"`
	BytesPerBlock int64 `json:"bytes_per_block"`
	Blocks        int64 `json:"blocks"`
	Tokens        int64 `json:"tokens"`
	// TimesDevice is the host tier's blocks over the GPUs' KV blocks (per GPU, as the
	// pools are).
	TimesDevice float64 `json:"times_device"`
}

func hostTierOf(p sizing.Plan, v *bytesValue) *hostTier {
	if !v.set || v.n <= 0 || p.BytesPerBlock <= 0 {
		return nil
	}
	bb := p.BytesPerBlock * int64(p.Config.TensorParallel)
	h := &hostTier{HostRAMBytes: v.n, BytesPerBlock: bb, Blocks: v.n / bb}
	h.Tokens = h.Blocks * int64(p.Config.BlockSize)
	if p.NumBlocks > 0 {
		h.TimesDevice = float64(h.Blocks) / float64(p.NumBlocks)
	}
	return h
}

func writeHostTier(w io.Writer, h *hostTier) error {
	_, err := fmt.Fprintf(w, "\nhost tier: %s of host RAM holds %s blocks of %s (%s tokens), %.1fx the GPU's KV blocks\n",
		bothUnits(h.HostRAMBytes), commas(h.Blocks), human(float64(h.BytesPerBlock)), commas(h.Tokens), h.TimesDevice)
	return err
}
