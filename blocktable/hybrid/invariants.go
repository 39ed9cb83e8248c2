package hybrid

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
)

// CheckInvariants verifies, per group and over the pool, everything the Manager relies
// on, and returns the first violation. It is O(blocks + nodes + held table entries).
//   - every block's reference count is the number of table entries that hold it; the
//     unreferenced blocks (the null block aside) are exactly the free queue, whose links
//     agree both ways and whose length is counted;
//   - every cached block is on its (node, group) list exactly once, and the lists hold
//     only cached blocks of their group; per-group and per-node counts agree;
//   - every live node is in the child table under its parent with its tokens and its
//     chained key, its hint is one of its live children or none, its children count is
//     right, and it has an entry, a child or a pin (no dead node);
//   - every sequence's pin is on its path, and its path is a chain of live nodes;
//   - full attention stays downward closed: a node with a block of a full-attention group
//     has a parent with one too, so eviction in queue order is leaf-only for full
//     attention (unless EvictBlocks dropped an interior block, as vLLM's evict_blocks
//     may: its descendants then stay cached but unreachable, as in vLLM).
func (m *Manager) CheckInvariants() error {
	st := m.st
	nb := len(st.blks)
	refs := make([]int32, nb)
	pins := make([]int32, len(st.nodes))
	for id, s := range m.seqs {
		for g, t := range s.tables {
			cover := max(s.extent, s.computed)
			if m.align[g] {
				cover = s.computed // one running state block, for the model's own tokens
			}
			if len(t) != (cover+m.bs[g]-1)/m.bs[g] {
				return fmt.Errorf("seq %d group %d: %d blocks for %d tokens and %d slots", id, g, len(t), s.computed, s.extent)
			}
			for _, b := range t {
				if b < 0 || int(b) >= nb {
					return fmt.Errorf("seq %d group %d: block %d outside the pool", id, g, b)
				}
				if b != blocks.NullID {
					refs[b]++
				}
			}
		}
		for i, n := range s.path {
			if n <= 0 || int(n) >= len(st.nodes) || st.nodes[n].key == 0 && st.nodes[n].parent == 0 && st.nodes[n].entries == 0 && st.nodes[n].children == 0 && st.nodes[n].pins == 0 {
				return fmt.Errorf("seq %d: path node %d at unit %d is not live", id, n, i)
			}
			parent := s.root
			if i > 0 {
				parent = s.path[i-1]
			}
			if st.nodes[n].parent != parent {
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
	inq := 0
	for b := 1; b < nb; b++ {
		x := &st.blks[b]
		if x.ref != refs[b] {
			return fmt.Errorf("block %d: refcount %d, held %d times", b, x.ref, refs[b])
		}
		if x.inq != (x.ref == 0) {
			return fmt.Errorf("block %d: refcount %d but in queue %v", b, x.ref, x.inq)
		}
		if x.inq {
			inq++
		}
	}
	if st.blks[blocks.NullID].inq || st.blks[blocks.NullID].node != 0 {
		return fmt.Errorf("null block queued or cached")
	}
	count, prev := 0, int32(noBlock)
	for b := st.qhead; b != noBlock; b = st.blks[b].next {
		if st.blks[b].prev != prev || !st.blks[b].inq {
			return fmt.Errorf("free queue broken at block %d", b)
		}
		if count++; count > nb {
			return fmt.Errorf("free queue has a cycle")
		}
		prev = b
	}
	if prev != st.qtail || count != st.qlen || count != inq {
		return fmt.Errorf("free queue: %d linked, %d counted, %d unreferenced", count, st.qlen, inq)
	}
	// Entries.
	perGroup := make([]int, m.ng)
	perNode := make([]int32, len(st.nodes))
	onList := make([]bool, nb)
	for n := range st.nodes {
		for g := range m.ng {
			last := int32(0)
			for b := st.head[n*m.ng+g]; b != 0; b = st.blks[b].lnext {
				if onList[b] || st.blks[b].node != int32(n) || int(st.blks[b].group) != g {
					return fmt.Errorf("node %d group %d: block %d listed wrongly", n, g, b)
				}
				onList[b] = true
				perGroup[g]++
				perNode[n]++
				last = b
			}
			if st.tail[n*m.ng+g] != last {
				return fmt.Errorf("node %d group %d: tail %d, last %d", n, g, st.tail[n*m.ng+g], last)
			}
		}
	}
	for b := 1; b < nb; b++ {
		if (st.blks[b].node != 0) != onList[b] {
			return fmt.Errorf("block %d: cached under node %d but listed %v", b, st.blks[b].node, onList[b])
		}
	}
	for g := range m.ng {
		if perGroup[g] != st.cached[g] {
			return fmt.Errorf("group %d: %d cached, counted %d", g, perGroup[g], st.cached[g])
		}
	}
	// Nodes.
	free := make([]bool, len(st.nodes))
	for _, n := range st.freeNodes {
		free[n] = true
	}
	kids := make([]int32, len(st.nodes))
	live := 0
	for n := 1; n < len(st.nodes); n++ {
		if free[n] {
			continue
		}
		live++
		kids[st.nodes[n].parent]++
	}
	if live != st.live {
		return fmt.Errorf("%d live nodes, counted %d", live, st.live)
	}
	inTable := 0
	for _, n := range st.slots {
		if n != 0 {
			inTable++
			if free[n] {
				return fmt.Errorf("free node %d in the child table", n)
			}
		}
	}
	if inTable+len(st.roots) != live || len(st.roots) != len(st.rootNS) {
		return fmt.Errorf("%d nodes in the child table and %d namespace roots (%d reverse), %d live", inTable, len(st.roots), len(st.rootNS), live)
	}
	for ns, n := range st.roots {
		if back, ok := st.rootNS[n]; !ok || back != ns || free[n] || st.nodes[n].parent != 0 {
			return fmt.Errorf("namespace root %d of %+v is not a live root", n, ns)
		}
	}
	for n := 1; n < len(st.nodes); n++ {
		if free[n] {
			continue
		}
		nd := &st.nodes[n]
		if nd.children != kids[n] || nd.entries != perNode[n] || nd.pins != pins[n] {
			return fmt.Errorf("node %d: children %d/%d entries %d/%d pins %d/%d", n, nd.children, kids[n], nd.entries, perNode[n], nd.pins, pins[n])
		}
		if nd.entries == 0 && nd.children == 0 && nd.pins == 0 {
			return fmt.Errorf("node %d is dead but not freed", n)
		}
		toks := st.ntok[n*m.unit : (n+1)*m.unit]
		if _, isRoot := st.rootNS[int32(n)]; isRoot {
			if nd.entries != 0 {
				return fmt.Errorf("namespace root %d caches blocks", n)
			}
		} else if nd.key != unitKey(st.nodes[nd.parent].key, toks) || st.child(nd.parent, nd.key, toks) != int32(n) {
			return fmt.Errorf("node %d not found under its parent by its key", n)
		}
		if h := nd.hint; h != 0 && (int(h) >= len(st.nodes) || free[h] || st.nodes[h].parent != int32(n)) {
			return fmt.Errorf("node %d: hint %d is not a live child", n, h)
		}
		_, parentIsRoot := st.rootNS[nd.parent]
		for g, spec := range m.specs {
			if spec.Downward() && st.dropped == 0 && nd.parent != 0 && !parentIsRoot && m.k[g] == 1 && st.head[n*m.ng+g] != 0 && st.head[int(nd.parent)*m.ng+g] == 0 {
				return fmt.Errorf("node %d: group %d (full attention) cached below an uncached parent", n, g)
			}
		}
	}
	return nil
}
