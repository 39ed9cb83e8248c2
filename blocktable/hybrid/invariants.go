package hybrid

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
)

// CheckInvariants verifies, per group and over the pool, everything the Manager relies
// on, and returns the first violation. It is O(blocks + nodes + held table entries).
//   - the free queue's own invariants (blocks.FreeQueue.CheckInvariants: links both ways,
//     queued exactly when unreferenced, counted) and the tree's
//     (prefix.GroupTree.CheckInvariants: every cached block on its (node, group) list
//     once, per-group and per-node counts, every live node in the child table under its
//     parent with its tokens and key, hints, no dead node);
//   - every block's reference count is the number of table entries that hold it, and the
//     null block is neither queued nor cached;
//   - every node's pins are the sequences positioned on it; every sequence's pin is the
//     end of its path, and its path is a chain of live nodes from its namespace's root;
//   - full attention stays downward closed: a node with a block of a full-attention group
//     has one at its parent block's node too (the group's units per block up: the nodes
//     between hold none of its blocks), so eviction in queue order is leaf-only for full
//     attention (unless EvictBlocks dropped an interior block, as vLLM's evict_blocks
//     may: its descendants then stay cached but unreachable, as in vLLM). With lower
//     tiers a copy into them holds its device block out of the queue while the parent
//     may be evicted, and the parent may leave the device for a lower tier first, so the
//     form that holds is: a full-attention block on the device below a parent the device
//     no longer caches for its group has its parent in a lower tier, or is itself in one
//     or being copied into one (the copy deferred its release); checked until a lower
//     tier first drops a slot (an eviction by its policy, a move down, a failed copy or
//     load), which may drop the copy the form relies on: past that point only the
//     drops' history tells a legitimate break from a bad one, which the tier machine's
//     event model keeps (TestTierMachine's closureCheck asks for the breaks themselves,
//     ClosureBreaks, and requires a drop of the block's copy or its parent's for each);
//   - with lower tiers, every block's count includes the copies in flight holding it, each
//     demoted block is held by one, every loading sequence is filed under its load, and
//     the tree's holds (prefix.GroupTree's, checked there per slot) are the swapped
//     sequences', one each;
//   - with a policy that reads Freeable, the kept figures (freeable.go) are each running
//     sequence's blocks, those it holds alone per group, and what a plan of its release
//     frees; records not in use keep nothing;
//   - the spare records are at most one more than the sequences, running and swapped out,
//     and every Freeable slot handed out is a record's or free.
func (m *Manager) CheckInvariants() error {
	q, t := m.st.q, m.st.t
	if err := q.CheckInvariants(); err != nil {
		return err
	}
	if err := t.CheckInvariants(); err != nil {
		return err
	}
	nb := q.NumBlocks()
	refs := make([]int, nb)
	pins := map[prefix.Node]int{}
	for id, s := range m.seqs {
		for g, tb := range s.tables {
			cover := max(s.extent, s.computed)
			if m.align[g] {
				cover = s.computed // one running state block, for the model's own tokens
			}
			if len(tb) != (cover+m.bs[g]-1)/m.bs[g] {
				return fmt.Errorf("seq %d group %d: %d blocks for %d tokens and %d slots", id, g, len(tb), s.computed, s.extent)
			}
			for _, b := range tb {
				if b < 0 || int(b) >= nb {
					return fmt.Errorf("seq %d group %d: block %d outside the pool", id, g, b)
				}
				if b != blocks.NullID {
					refs[b]++
				}
			}
		}
		for i, n := range s.path {
			if n <= 0 || !t.IsLive(n) || t.IsRoot(n) {
				return fmt.Errorf("seq %d: path node %d at unit %d is not live", id, n, i)
			}
			parent := s.root
			if i > 0 {
				parent = s.path[i-1]
			}
			if t.Parent(n) != parent {
				return fmt.Errorf("seq %d: path breaks at unit %d", id, i)
			}
		}
		if s.pinned != 0 {
			pins[s.pinned]++
			if len(s.path) == 0 || s.path[len(s.path)-1] != s.pinned {
				return fmt.Errorf("seq %d: pin %d is not the end of its path", id, s.pinned)
			}
		}
	}
	for b := 1; b < nb; b++ {
		refs[b] += t.TransferRefs(blocks.ID(b)) // held by copies in flight
		if r := q.RefCount(blocks.ID(b)); r != refs[b] {
			return fmt.Errorf("block %d: refcount %d, held %d times (transfers included)", b, r, refs[b])
		}
	}
	if t.IsCached(blocks.NullID) {
		return fmt.Errorf("null block cached")
	}
	if st := t.Stats(); st.Nodes != countNodes(t) {
		return fmt.Errorf("tree counts %d nodes, yields %d", st.Nodes, countNodes(t))
	}
	closed := m.st.dropped == 0 && !m.lowerDropped()
	for n := range t.Nodes() {
		if t.Pins(n) != pins[n] {
			return fmt.Errorf("node %d: %d pins, %d sequences on it", n, t.Pins(n), pins[n])
		}
		if !closed || t.IsRoot(n) {
			continue
		}
		for g := range m.specs {
			if m.closureBroken(n, g) {
				return fmt.Errorf("node %d: group %d (full attention) cached below a parent no tier holds", n, g)
			}
		}
	}
	if m.st.tiers != nil {
		if err := m.checkTiers(); err != nil {
			return err
		}
		if err := m.checkSwapped(); err != nil {
			return err
		}
	}
	if err := m.checkFreeable(); err != nil {
		return err
	}
	if err := m.checkSpare(); err != nil {
		return err
	}
	return m.checkOrder()
}

func countNodes(t *prefix.GroupTree) int {
	n := 0
	for range t.Nodes() {
		n++
	}
	return n
}

// closureBroken reports whether group g's device blocks at node n break full attention's
// downward closure in the form tiers keep (CheckInvariants): g is full attention, n has a
// device block of it and the node of its parent block none, and (with tiers) no lower
// tier holds the parent's nor does a copy keep n's (deferredByCopy). The parent block
// is the group's units per block up (m.k[g]): a block of 8 tokens over units of 4 has it
// two nodes up, and the node between holds no block of the group. A first block, whose
// parent is its namespace's root, breaks nothing.
func (m *Manager) closureBroken(n prefix.Node, g int) bool {
	t := m.st.t
	if !m.specs[g].Downward() || t.First(n, g) == blocks.NullID {
		return false
	}
	parent := m.st.up(n, m.k[g])
	return parent != prefix.NoNode && !t.IsRoot(parent) && t.First(parent, g) == blocks.NullID &&
		(m.st.tiers == nil || !t.HeldBelow(parent, g) && !m.deferredByCopy(n, g))
}

// lowerDropped reports whether a lower tier ever dropped a slot (evicted by its policy,
// moved down, or lost to a failed copy or load): from then on a device block below an
// uncached parent may have lost its lower-tier copy (CheckInvariants).
func (m *Manager) lowerDropped() bool {
	for tier := 1; tier < m.NumTiers(); tier++ {
		if st := m.st.t.TierStatsOf(prefix.Tier(tier)); st.Evicted != 0 || st.StoreFailed != 0 {
			return true
		}
	}
	return false
}

// deferredByCopy reports whether group g's device blocks at node n are ones a copy into
// a lower tier kept out of the free queue: one in flight holds a block of the list, or a
// lower tier holds or receives (n, g).
func (m *Manager) deferredByCopy(n prefix.Node, g int) bool {
	t := m.st.t
	if t.HeldBelow(n, g) {
		return true
	}
	for b := t.First(n, g); b != blocks.NullID; b = t.NextCached(b) {
		if t.TransferRefs(b) > 0 {
			return true
		}
	}
	return false
}
