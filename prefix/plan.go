package prefix

import "github.com/kvpage/kvpage/blocks"

// ReleasePlan accumulates releases that PlanRelease counts without making them: it answers
// "how many blocks would become available (free, or reclaimable by the index) if these
// holders released these blocks?" for a preemption planner. Its zero value is an empty
// plan; Reset empties it in O(1). It belongs to one Index and is not safe for concurrent use.
//
// Per-block figures (holders left, pinned children left) are loaded lazily and stamped
// with the plan's generation, so a plan costs nothing to start and its scratch arrays are
// allocated once, at the first use.
type ReleasePlan struct {
	// blocks holds each block's figures, indexed by block ID: one 12-byte record, so that
	// loading a block reads and writes one cache line (three parallel arrays made it three,
	// a random one each per block a preemption plans).
	blocks []planBlock
	gen    uint32
}

// planBlock is one block's figures in a ReleasePlan, valid when stamp is the plan's gen.
type planBlock struct {
	holders int32 // holders beyond the index's reference, as the plan leaves them
	kids    int32 // pinned children, as the plan leaves them
	stamp   uint32
}

// Reset empties the plan: the next PlanRelease counts from the index's state now.
func (p *ReleasePlan) Reset() {
	p.gen++
	if p.gen == 0 { // wrapped: old stamps could look current
		for i := range p.blocks {
			p.blocks[i].stamp = 0
		}
		p.gen = 1
	}
}

// PlanRelease adds to plan one holder's release of ids (each listed once per reference
// held, as Release takes them) and returns how many more blocks the plan now makes
// available: uncached blocks left with no holder, and cached blocks left unpinned (no
// holder and no pinned child), with the ancestors that lose their last pinned child in
// turn, walking up the path as Release does. It changes nothing in the index or the pool;
// the plan is valid until the index or the pool changes. Releases added to one plan
// combine exactly: the sum of the returns is what releasing all of them would make
// available, so what one holder's release alone frees is PlanRelease on a fresh plan.
//
// A cached block can stay pinned after its last holder leaves (after a duplicate commit a
// request commits its next blocks under the index's copy without holding it), so a block's
// own refcount does not tell; the walk does. Cost: O(len(ids)) plus the ancestors walked.
func (x *Index) PlanRelease(plan *ReleasePlan, ids []blocks.ID) int {
	if len(plan.blocks) < x.nb {
		plan.blocks = make([]planBlock, x.nb)
		plan.gen = 1
	} else if plan.gen == 0 {
		plan.gen = 1
	}
	gain := 0
	nodes := x.nodes
	for _, b := range ids {
		if uint(b) >= uint(x.nb) {
			continue
		}
		pb := x.planLoad(plan, b)
		pb.holders--
		if pb.holders != 0 {
			continue
		}
		n := nodeOf(b)
		if nodes[n].flags&flagCached == 0 {
			gain++
			continue
		}
		for pb.holders <= 0 && pb.kids <= 0 {
			gain++
			p := nodes[nodeOf(b)].parent
			if !x.isBlock(p) {
				break
			}
			b = blockOf(p)
			pb = x.planLoad(plan, b)
			pb.kids--
		}
	}
	return gain
}

// planLoad brings block b into plan and returns its record: its holders (its refcount less
// the index's reference) and, for a cached block, its pinned children.
func (x *Index) planLoad(plan *ReleasePlan, b blocks.ID) *planBlock {
	pb := &plan.blocks[b]
	if pb.stamp == plan.gen {
		return pb
	}
	pb.stamp = plan.gen
	h, kids := int32(x.pool.RefCount(b)), int32(0)
	if nd := &x.nodes[nodeOf(b)]; nd.flags&flagCached != 0 {
		h--
		kids = nd.pinnedKids
	}
	pb.holders, pb.kids = h, kids
	return pb
}
