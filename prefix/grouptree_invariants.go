package prefix

import "fmt"

// CheckInvariants verifies the tree and returns the first violation. It is O(IDs + nodes)
// and allocates; it is for tests and the kvinvariants build tag.
//   - every cached ID is on its (node, group) list exactly once, the lists hold only IDs
//     cached there, tails are the lists' ends, and per-group and per-node counts agree;
//   - every live node is found in the child table under its parent by its key and tokens
//     (namespace roots through their namespace instead), its hint is a live child or none,
//     its children count is right, and it has an entry, a child or a pin: no dead node;
//   - the zero namespace's root caches nothing, and neither does any namespace root;
//   - with lower tiers, each tier's books (checkTiers), its entries counted as their
//     nodes' entries.
//
// Pins are counted, not checked against their holders: the owner of the tree knows
// which sequences sit where (Pins and Nodes let it compare).
func (t *GroupTree) CheckInvariants() error {
	perNode := make([]int32, len(t.nodes))
	for ti := range t.res {
		r := &t.res[ti]
		nids := len(r.ent)
		onList := make([]bool, nids)
		perGroup := make([]int, t.ng)
		lists := make([]int, t.ng)
		if len(r.head) != len(t.nodes)*t.ng || len(r.tail) != len(r.head) {
			return fmt.Errorf("tier %v: %d list heads for %d nodes", Tier(ti), len(r.head), len(t.nodes))
		}
		for n := range t.nodes {
			for g := range t.ng {
				last := int32(0)
				for b := r.head[n*t.ng+g]; b != 0; b = r.ent[b].next {
					if b < 0 || int(b) >= nids || onList[b] || r.ent[b].node != Node(n) || int(r.ent[b].group) != g {
						return fmt.Errorf("tier %v node %d group %d: block %d listed wrongly", Tier(ti), n, g, b)
					}
					onList[b] = true
					perGroup[g]++
					perNode[n]++
					last = b
				}
				if last != 0 {
					lists[g]++
				}
				if r.tail[n*t.ng+g] != last {
					return fmt.Errorf("tier %v node %d group %d: tail %d, last %d", Tier(ti), n, g, r.tail[n*t.ng+g], last)
				}
			}
		}
		// NextCached and IsCached read the null block's entry unchecked: it is never written.
		if nids > 0 && r.ent[0] != (gentry{}) {
			return fmt.Errorf("tier %v: the null block has an entry %+v", Tier(ti), r.ent[0])
		}
		for b := range nids {
			if (r.ent[b].node != 0) != onList[b] {
				return fmt.Errorf("tier %v block %d: cached under node %d but listed %v", Tier(ti), b, r.ent[b].node, onList[b])
			}
		}
		for g := range t.ng {
			if perGroup[g] != r.cached[g] || lists[g] != r.prefixes[g] {
				return fmt.Errorf("tier %v group %d: %d cached in %d lists, counted %d in %d", Tier(ti), g, perGroup[g], lists[g], r.cached[g], r.prefixes[g])
			}
		}
	}
	if t.tiers != nil {
		if err := t.checkTiers(perNode); err != nil {
			return err
		}
	}
	if perNode[0] != 0 {
		return fmt.Errorf("the root caches %d blocks", perNode[0])
	}
	free := make([]bool, len(t.nodes))
	for _, n := range t.freeNodes {
		if n <= 0 || int(n) >= len(t.nodes) || free[n] || t.nodes[n] != freeNode {
			return fmt.Errorf("free node %d is not a clean free slot", n)
		}
		free[n] = true
	}
	kids := make([]int32, len(t.nodes))
	live := 0
	for n := 1; n < len(t.nodes); n++ {
		if free[n] {
			continue
		}
		if t.nodes[n].parent == NoNode {
			return fmt.Errorf("node %d is marked free but not on the free list", n)
		}
		live++
		kids[t.nodes[n].parent]++
	}
	if live != t.live {
		return fmt.Errorf("%d live nodes, counted %d", live, t.live)
	}
	inTable := 0
	for _, n := range t.slots {
		if n != 0 {
			inTable++
			if int(n) >= len(t.nodes) || free[n] || t.nodes[n].root {
				return fmt.Errorf("node %d in the child table is free or a root", n)
			}
		}
	}
	if inTable+len(t.roots) != live || len(t.roots) != len(t.rootNS) {
		return fmt.Errorf("%d nodes in the child table and %d namespace roots (%d reverse), %d live", inTable, len(t.roots), len(t.rootNS), live)
	}
	for ns, n := range t.roots {
		if back, ok := t.rootNS[n]; !ok || back != ns || free[n] || !t.nodes[n].root || t.nodes[n].parent != 0 {
			return fmt.Errorf("namespace root %d of %+v is not a live root", n, ns)
		}
	}
	if t.nodes[0].children != kids[0] {
		return fmt.Errorf("root: children %d, counted %d", t.nodes[0].children, kids[0])
	}
	for n := 1; n < len(t.nodes); n++ {
		if free[n] {
			continue
		}
		nd := &t.nodes[n]
		if nd.children != kids[n] || nd.entries != perNode[n] || nd.pins < 0 {
			return fmt.Errorf("node %d: children %d/%d entries %d/%d pins %d", n, nd.children, kids[n], nd.entries, perNode[n], nd.pins)
		}
		if nd.entries == 0 && nd.children == 0 && nd.pins == 0 {
			return fmt.Errorf("node %d is dead but not freed", n)
		}
		if nd.root {
			if nd.entries != 0 {
				return fmt.Errorf("namespace root %d caches blocks", n)
			}
		} else if nd.key != unitKey(t.nodes[nd.parent].key, t.tokens(Node(n))) || t.child(nd.parent, nd.key, t.tokens(Node(n))) != Node(n) {
			return fmt.Errorf("node %d not found under its parent by its key", n)
		}
		if h := nd.hint; h != 0 && (h < 0 || int(h) >= len(t.nodes) || free[h] || t.nodes[h].parent != Node(n)) {
			return fmt.Errorf("node %d: hint %d is not a live child", n, h)
		}
	}
	if h := t.nodes[0].hint; h != 0 && (free[h] || t.nodes[h].parent != 0 || t.nodes[h].root) {
		return fmt.Errorf("root: hint %d is not a live child", h)
	}
	return nil
}
