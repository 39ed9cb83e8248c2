package prefix

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
)

// control holds the index's retention and explanation state that the core paths only
// consult: the eviction history behind Explain and the cause of the eviction under way.
// It lives beside the core so that the match, commit and eviction paths each pay one
// predictable branch for it and nothing else.
type control struct {
	ghost ghostTable
	// cause is what the eviction under way is for, recorded in the history with each
	// victim: EvictPolicy unless a quota or an epoch drives it.
	cause EvictCause

	// Pins (retention.go): pins per block, nil before the first Pin; pinned counts the
	// blocks with at least one.
	pins   []uint32
	pinned int
	// Session holds (retention.go), nil before the first.
	sessions map[SessionID]*session
	// Quotas per namespace (quota.go), nil without WithQuotas.
	quota *quotas
	// Weight epochs (epoch.go): per namespace, nil before the first bump; retired roots
	// that still have blocks, and tombstone slots.
	epochs      map[Namespace]uint32
	retiredLive int
	tombs       int
}

func (c *control) init(cfg *config) {
	c.ghost.init(cfg.history)
	c.cause = EvictPolicy
}

// recordEvicted notes that block node n is being evicted now: for its namespace's quota,
// for an earlier weight epoch (while a retired root lives, found by a walk up), or by the
// policy.
func (x *Index) recordEvicted(n int32) {
	cause := x.ctl.cause
	if cause == EvictPolicy && x.ctl.retiredLive > 0 && x.retiredRootOf(n) != 0 {
		cause = EvictEpoch
	}
	x.ctl.ghost.record(x.eventKey(n), x.clock.Now(), cause)
}

// rootInfoFor is the namespace information ns's root would have: the hashes its keys mix
// in, for a namespace that has no root now.
func (c *control) rootInfoFor(ns Namespace) rootInfo {
	ri := baseRootInfo(ns)
	c.epochMix(&ri)
	return ri
}

// baseRootInfo is rootInfoFor before any weight epoch.
func baseRootInfo(ns Namespace) rootInfo {
	ri := rootInfo{ns: ns, hasLo: ns.LoRA != "", hasSa: ns.Salt != ""}
	if ri.hasLo {
		ri.lora = hashString(ns.LoRA)
	}
	if ri.hasSa {
		ri.salt = hashString(ns.Salt)
	}
	return ri
}

// checkControl verifies the retention state: pin counts add up, every pinned block is
// held once per pin (and once more by the index while cached: EvictBlocks may drop a
// pinned block, which its pins keep until Unpin), and each capped namespace's count is
// its cached blocks.
func (x *Index) checkControl() error {
	c := &x.ctl
	pinned := 0
	for id, n := range c.pins {
		if n == 0 {
			continue
		}
		pinned++
		want := int(n)
		if x.nodes[id+1].flags&flagCached != 0 {
			want++ // the index's own reference
		}
		if x.pool.RefCount(blocks.ID(id)) < want {
			return fmt.Errorf("block %d has %d pins but is not held that often", id, n)
		}
	}
	if pinned != c.pinned {
		return fmt.Errorf("%d pinned blocks counted, %d found", c.pinned, pinned)
	}
	if q := c.quota; q != nil {
		counts := make([]int, len(q.ns))
		for n := int32(1); int(n) <= x.nb; n++ {
			s := q.blockSlot[n]
			if x.nodes[n].flags&flagCached == 0 {
				if s != 0 {
					return fmt.Errorf("uncached block %d is filed under quota slot %d", n-1, s)
				}
				continue
			}
			if want := q.slots[x.nsOfBlock(n)]; s != want && q.ns[want].sub != nil {
				return fmt.Errorf("block %d filed under quota slot %d, its namespace's is %d", n-1, s, want)
			}
			counts[s]++
		}
		for s := 1; s < len(q.ns); s++ {
			if q.ns[s].sub != nil && counts[s] != q.ns[s].cached {
				return fmt.Errorf("namespace %+v counts %d cached blocks, %d found", q.ns[s].ns, q.ns[s].cached, counts[s])
			}
		}
	}
	return nil
}
