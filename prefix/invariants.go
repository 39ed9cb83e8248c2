package prefix

import (
	"fmt"

	"github.com/kvpage/kvpage/internal/invariant"
)

// mutated runs the sampled invariant check after a mutation under the kvinvariants tag.
func (x *Index) mutated() {
	if !invariant.Enabled {
		return
	}
	x.mutations++
	if invariant.Sample(x.mutations) {
		invariant.Check(x.CheckInvariants)
	}
}

// CheckInvariants verifies the tree against the pool and returns the first violation:
// every cached block is held by the pool at least once (the index's reference), and more
// than once exactly when a request holds it; parent and child links agree, and every
// cached block is found under its parent with its own tokens (as its parent's hint, or in
// the child table, which holds every cached block but the hints); keys
// are the chained hashes of the tokens; a block is pinned exactly when a request holds it
// or a child is pinned; the evictable set is exactly the unpinned leaves; counts add up.
// It costs O(blocks) and allocates: it is for tests and the kvinvariants build tag.
func (x *Index) CheckInvariants() error {
	roots := x.rootsOfAll()
	children := make([]int32, len(x.nodes))
	pinnedKids := make([]int32, len(x.nodes))
	cached, pinned, leaves := 0, 0, 0
	for n := int32(1); int(n) <= x.nb; n++ {
		nd := &x.nodes[n]
		if nd.flags&flagCached == 0 {
			if nd.flags != 0 || nd.children != 0 || nd.pinnedKids != 0 {
				return fmt.Errorf("uncached block %d has flags %#x, %d children, %d pinned children", n-1, nd.flags, nd.children, nd.pinnedKids)
			}
			continue
		}
		cached++
		id := blockOf(n)
		refs := x.pool.RefCount(id)
		if refs < 1 {
			return fmt.Errorf("cached block %d has refcount %d in the pool", id, refs)
		}
		p := nd.parent
		if p <= 0 || int(p) >= len(x.nodes) || x.nodes[p].flags&(flagCached|flagRoot) == 0 {
			return fmt.Errorf("cached block %d has parent node %d, which is neither cached nor a root", id, p)
		}
		children[p]++
		if nd.flags&flagPinned != 0 {
			pinned++
			pinnedKids[p]++
		}
		if err := x.checkKey(n, roots[n]); err != nil {
			return err
		}
		if x.findChild(p, nd.key, x.blockTokens(n), x.mm[n]) != n {
			return fmt.Errorf("cached block %d is not found under its parent in the child table", id)
		}
		if (nd.flags&flagMM != 0) != (len(x.mm[n]) > 0) {
			return fmt.Errorf("block %d: multimodal flag disagrees with its keys", id)
		}
	}
	for n := int32(1); int(n) <= x.nb; n++ {
		nd := &x.nodes[n]
		if nd.flags&flagCached == 0 {
			continue
		}
		id := blockOf(n)
		if nd.children != children[n] || nd.pinnedKids != pinnedKids[n] {
			return fmt.Errorf("block %d counts %d children (%d pinned) but has %d (%d pinned)", id, nd.children, nd.pinnedKids, children[n], pinnedKids[n])
		}
		wantPinned := x.pool.RefCount(id) > 1 || pinnedKids[n] > 0
		if (nd.flags&flagPinned != 0) != wantPinned {
			return fmt.Errorf("block %d pinned=%v but refcount %d and %d pinned children", id, !wantPinned, x.pool.RefCount(id), pinnedKids[n])
		}
		evictable := !wantPinned && children[n] == 0
		if evictable {
			leaves++
		}
	}
	if err := x.checkRoots(children); err != nil {
		return err
	}
	if cached != x.cached || pinned != x.pinned {
		return fmt.Errorf("counted %d cached (%d pinned) but the index says %d (%d)", cached, pinned, x.cached, x.pinned)
	}
	if x.policy.Len() != leaves {
		return fmt.Errorf("%d eviction candidates but %d unreferenced leaves", x.policy.Len(), leaves)
	}
	inTable := 0
	for _, s := range x.table.slots {
		if s.n != 0 {
			inTable++
			if !x.isBlock(s.n) || s.tag != keyTag(x.nodes[s.n].key) {
				return fmt.Errorf("child table slot holds node %d with tag %#x, not its key's", s.n, s.tag)
			}
			if x.nodes[x.nodes[s.n].parent].hint == s.n {
				return fmt.Errorf("child table holds block %d, its parent's hint", s.n-1)
			}
		}
	}
	hinted := 0
	for n := range x.nodes {
		if x.nodes[n].hint != 0 {
			hinted++
		}
	}
	if inTable != cached-hinted {
		return fmt.Errorf("child table holds %d nodes but %d blocks are cached, %d of them hints", inTable, cached, hinted)
	}
	if len(x.mm) > cached {
		return fmt.Errorf("%d multimodal entries for %d cached blocks", len(x.mm), cached)
	}
	if err := x.checkHints(); err != nil {
		return err
	}
	if err := x.checkControl(); err != nil {
		return err
	}
	if x.tiers != nil {
		return x.checkTiers()
	}
	return nil
}

// checkRoots verifies the namespace root slots against children, the children counted
// per node: a live root counts its children and is its namespace's entry in the map; a
// free slot is zero but for its generation, has no rootInfo, is on the free list exactly
// once and in no map entry; live roots and free slots add up to the slots there are; every
// live root has a child (Commit creates a root with its first block, and the last block's
// eviction frees it).
func (x *Index) checkRoots(children []int32) error {
	slots := len(x.nodes) - x.nb - 1
	if len(x.rootInfo) != slots {
		return fmt.Errorf("%d rootInfo entries for %d root slots", len(x.rootInfo), slots)
	}
	free := make(map[int32]bool, len(x.freeRoots))
	for _, r := range x.freeRoots {
		if !x.isRootSlot(r) || free[r] {
			return fmt.Errorf("free root list holds %d twice or out of range", r)
		}
		free[r] = true
	}
	live, retired, tombs := 0, 0, 0
	for r := int32(x.nb + 1); int(r) < len(x.nodes); r++ {
		nd, ri := &x.nodes[r], x.root(r)
		if nd.flags&flagRoot == 0 && ri.retired {
			tombs++ // epoch.go: never reused
			continue
		}
		if nd.flags&flagRoot == 0 {
			if !free[r] {
				return fmt.Errorf("root slot %d is neither a root nor free", r)
			}
			if blank := (node{gen: nd.gen}); *nd != blank || *ri != (rootInfo{}) || children[r] != 0 {
				return fmt.Errorf("free root slot %d is not blank", r)
			}
			continue
		}
		live++
		if free[r] {
			return fmt.Errorf("namespace root %d is on the free list", r)
		}
		if nd.flags != flagRoot || nd.parent != 0 || nd.pinnedKids != 0 {
			return fmt.Errorf("namespace root %d has flags %#x, parent %d, %d pinned children", r, nd.flags, nd.parent, nd.pinnedKids)
		}
		if nd.children != children[r] {
			return fmt.Errorf("namespace root %d counts %d children but has %d", r, nd.children, children[r])
		}
		if nd.children == 0 {
			return fmt.Errorf("namespace root %d has no child and nothing will free it", r)
		}
		if ri.retired {
			retired++
			if x.roots[ri.ns] == r {
				return fmt.Errorf("retired root %d is still its namespace's root", r)
			}
			continue
		}
		if x.roots[ri.ns] != r {
			return fmt.Errorf("namespace root %d is not its namespace's root", r)
		}
	}
	if live-retired != len(x.roots) || live+len(x.freeRoots)+tombs != slots || tombs != x.ctl.tombs {
		return fmt.Errorf("%d live roots and %d free slots, but %d map entries and %d slots", live, len(x.freeRoots), len(x.roots), slots)
	}
	if x.defRoot != x.roots[Namespace{}] {
		return fmt.Errorf("default root %d but the map says %d", x.defRoot, x.roots[Namespace{}])
	}
	return nil
}

// isRootSlot reports whether n is a root slot index, live or free.
func (x *Index) isRootSlot(n int32) bool { return int(n) > x.nb && int(n) < len(x.nodes) }

// checkHints verifies every node's hint: none for a node that is not in the tree or has no
// text-only child, else one of its own cached children without multimodal keys.
func (x *Index) checkHints() error {
	for n := range x.nodes {
		c := x.nodes[n].hint
		if c == 0 {
			continue
		}
		if x.nodes[n].flags&(flagCached|flagRoot) == 0 {
			return fmt.Errorf("node %d is not in the tree but hints at child %d", n, c)
		}
		if !x.isBlock(c) || x.nodes[c].flags&flagCached == 0 || x.nodes[c].parent != int32(n) || x.nodes[c].flags&flagMM != 0 {
			return fmt.Errorf("node %d hints at %d, which is not one of its cached text-only children", n, c)
		}
	}
	return nil
}

// rootsOfAll returns the namespace root above every cached node (0 where there is none),
// memoised so that it costs O(nodes), not O(nodes x depth).
func (x *Index) rootsOfAll() []int32 {
	roots := make([]int32, len(x.nodes))
	for r := x.nb + 1; r < len(x.nodes); r++ {
		roots[r] = int32(r)
	}
	var path []int32
	for n := int32(1); int(n) <= x.nb; n++ {
		if x.nodes[n].flags&flagCached == 0 || roots[n] != 0 {
			continue
		}
		path = path[:0]
		m := n
		for x.isBlock(m) && roots[m] == 0 && x.nodes[m].flags&flagCached != 0 && len(path) <= x.nb {
			path = append(path, m)
			m = x.nodes[m].parent
		}
		r := int32(0)
		if m > 0 && int(m) < len(roots) {
			r = roots[m]
		}
		for _, p := range path {
			roots[p] = r
		}
	}
	return roots
}

// checkKey verifies that block node n, under namespace root r, has the chained hash of its
// tokens as its key.
func (x *Index) checkKey(n, r int32) error {
	nd := &x.nodes[n]
	if r == 0 {
		return fmt.Errorf("block %d lies under no namespace root", n-1)
	}
	want := x.childKey(x.nodes[nd.parent].key, x.blockTokens(n), x.root(r), !x.isBlock(nd.parent), x.mm[n])
	if want != nd.key {
		return fmt.Errorf("block %d has key %#x but its tokens hash to %#x", n-1, nd.key, want)
	}
	return nil
}
