package sim

import (
	"fmt"

	"github.com/kvpage/kvpage/prefix"
)

// The hybrid scheme's lower tiers: each pool's Manager has its share of the host and the
// disk (newHybridAlloc), the tier clock drives them all over shared links (tierlinks.go),
// and a request's hit is counted once per token, where the pools found it.

// loaded queues the copies s's admission (hit tokens every pool serves) started, makes s
// wait for every pool's load in flight, and counts, for a first admission, where its hit
// tokens were found: the device's tokens are those every pool's device hit covers, the
// rest loaded, split between the host and disk as the blocks every pool loaded from each
// (AdmitResult.Tiers counts blocks summed over groups: several groups' blocks of one
// token span are one span of tokens, not several).
func (a *hybridAlloc) loaded(s *seq, hit int) error {
	if err := a.clock.transfer(); err != nil {
		return err
	}
	dev := hit
	var from [prefix.MaxTiers]uint64
	load := false
	for i := range a.pools {
		r := &a.pools[i].res
		dev = min(dev, r.Hit)
		for t := 1; t < prefix.MaxTiers; t++ {
			from[t] += uint64(r.Tiers.Blocks[t])
		}
		if r.Load != 0 {
			load = true
			a.clock.wait(s, loadKey{i, r.Load})
		}
	}
	a.clock.admitted(load)
	if s.preempted {
		return nil
	}
	a.firstPrompt += uint64(s.stored)
	a.tierTokens[prefix.Device] += uint64(dev)
	lower := uint64(hit - dev)
	var blocks uint64
	for _, b := range from {
		blocks += b
	}
	if lower > 0 && blocks == 0 {
		return fmt.Errorf("request %d: %d tokens past the pools' device hit, and no pool loaded a block", s.req.ID, lower)
	}
	last := 0 // the last tier loaded from takes what rounding down leaves
	for t := range from {
		if from[t] > 0 {
			last = t
		}
	}
	left := lower
	for t := 1; t <= last; t++ {
		k := lower * from[t] / max(blocks, 1)
		if t == last {
			k = left
		}
		a.tierTokens[t] += k
		left -= k
	}
	return nil
}

func (a *hybridAlloc) transfers() *tierClock { return &a.clock }

// tierResults sums the pools' tiers: their blocks, bytes and plans (TierStats), and
// the tokens each tier served (loaded).
func (a *hybridAlloc) tierResults(totalSteps int) []TierResult {
	if !a.tiers.enabled() {
		return nil
	}
	out := make([]TierResult, a.pools[0].m.NumTiers())
	for _, p := range a.pools {
		for t := range out {
			st := p.m.TierStats(prefix.Tier(t))
			r := &out[t]
			r.StoredBlocks += st.Stored
			r.LoadedBlocks += st.Loaded
			r.BytesIn += st.BytesIn
			r.BytesOut += st.BytesOut
			r.Plans += st.Plans
			blocks := p.m.Stats().Capacity
			switch t {
			case 1:
				blocks = p.hostBlocks
			case 2:
				blocks = p.diskBlocks
			}
			r.CapacityBlocks += blocks
			r.CapacityBytes += int64(blocks) * p.unitBytes
		}
	}
	for t := range out {
		out[t].HitTokens = a.tierTokens[t]
	}
	finishTiers(out, a.tiers, &a.clock, a.firstPrompt, totalSteps)
	return out
}
