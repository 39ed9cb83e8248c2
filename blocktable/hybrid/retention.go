package hybrid

import "fmt"

// Sparse retention, as vLLM's prefix_cache_retention_interval (PRs #43447 for sliding
// windows and #45845 for Mamba): a sliding-window or Mamba group caches only the blocks a
// hit can use at a retained boundary, so that the blocks no hit would read stop crowding
// the cache. The boundaries are the multiples of the interval (none for interval 0) and
// the prompt's replay boundary: its length - 1 (the longest hit a replay of the prompt can
// take), aligned down to the LCM of the block sizes. At a boundary a sliding window keeps
// the ceil((window - 1) / block) blocks before it (one more, shifted a block right, with
// EAGLE), the run its hit needs; Mamba keeps the one state block ending on it. Blocks not
// retained are still computed and held while the sequence runs; they are just never
// cached, and since a hit needs its whole run cached, the hit rule sees the gaps without
// change. Full attention, chunked local attention and other kinds cache every block.
//
// Not modelled: vLLM's Marconi-style shared-prefix junction (a second retained boundary
// where a request's prompt first diverges from a cached one, PR #37898), and the newer
// vLLM rule under which even the default (dense) mode keeps sliding-window blocks only
// at alignment boundaries when the window is shorter than the alignment.

// ErrRetentionWithoutSparse is returned by New for a Config with a RetentionInterval but
// not SparseRetention: dense retention caches every full block, so the interval would be
// ignored, and a user who set it expects sparse retention. Set SparseRetention too (vLLM's
// prefix_cache_retention_interval turns sparse retention on by being set), or leave the
// interval 0. errors.Is also recognises it as blocktable.ErrInvalidArgument.
var ErrRetentionWithoutSparse = fmt.Errorf("hybrid: retention interval without sparse retention: %w", errInvalid)

// setRetention checks and sets cfg's retention (m.lcm known).
func (m *Manager) setRetention(cfg *Config) error {
	if !cfg.SparseRetention {
		if cfg.RetentionInterval != 0 {
			return fmt.Errorf("%w (interval %d tokens; set SparseRetention)", ErrRetentionWithoutSparse, cfg.RetentionInterval)
		}
		return nil
	}
	if cfg.RetentionInterval < 0 || cfg.RetentionInterval%m.lcm != 0 {
		return fmt.Errorf("%w: retention interval %d is not a multiple of %d tokens", errInvalid, cfg.RetentionInterval, m.lcm)
	}
	m.sparse, m.interval = true, cfg.RetentionInterval
	return nil
}

// retained reports whether block i of group g of s is cached under sparse retention.
func (m *Manager) retained(s *seq, g, i int) bool {
	bs := m.bs[g]
	aligned := (s.promptLen - 1) / m.lcm * m.lcm // the replay boundary
	switch spec := m.specs[g].(type) {
	case SlidingWindow:
		need := (spec.Window - 1 + bs - 1) / bs
		shift := 0
		if m.eagle {
			need, shift = need+1, 1
		}
		if m.interval > 0 {
			per := m.interval / bs
			if need >= per {
				return true // every block is some boundary's run
			}
			if i >= shift && (i-shift)%per >= per-need {
				return true
			}
		}
		end := aligned/bs + shift
		return i >= end-need && i < end
	case Mamba:
		if m.interval > 0 {
			per := m.interval / bs
			if per <= 1 || (i+1)%per == 0 {
				return true
			}
		}
		return i == aligned/bs-1
	}
	return true
}
