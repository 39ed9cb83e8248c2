package prefix

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/kvpage/kvpage/blocks"
)

// WriteState writes the index's whole state to w as deterministic, line-oriented text:
// each live namespace's tree (namespaces by LoRA, then salt), depth first with children in
// block order, one line per cached block (its tokens, pool refcount, pinned or evictable,
// last access, hits, multimodal keys), the evictable blocks in LRU order (oldest last
// access first, ties by ID), and the counters. Two indexes that will behave identically write identical text, so tests use it
// for golden files and as a deep snapshot. It allocates and costs O(blocks log blocks): it
// is for tests and debugging, never for a hot path.
//
//	index blocksize=4 cached=3 pinned=1 reclaimable=2 namespaces=1 policy=lru clock=7
//	  ns lora="" salt=""
//	    block 1 tokens=0,1,2,3 refs=2 pinned last=5 hits=1
//	      block 2 tokens=4,5,6,7 refs=1 evictable last=6 hits=1
//	  evictable 2
//	  counters lookups=1 lookedup=8 hittokens=0 inserts=2 duplicates=0 evictions=0 dropped=0
func (x *Index) WriteState(w io.Writer) error {
	var b bytes.Buffer
	policy := x.policy.Name()
	fmt.Fprintf(&b, "index blocksize=%d cached=%d pinned=%d reclaimable=%d namespaces=%d policy=%s clock=%d\n",
		x.bs, x.cached, x.pinned, x.Reclaimable(), x.numRoots(), policy, x.clock.Now())
	children := make(map[int32][]int32)
	var evictable []blocks.ID
	for n := int32(1); int(n) <= x.nb; n++ {
		nd := &x.nodes[n]
		if nd.flags&flagCached == 0 {
			continue
		}
		children[nd.parent] = append(children[nd.parent], n) // ascending block order
		if nd.flags&flagPinned == 0 && nd.children == 0 {
			evictable = append(evictable, blockOf(n))
		}
	}
	// Live namespaces by name, not by root slot: slots are reused in an order that does
	// not change how the index behaves.
	roots := make([]int32, 0, x.numRoots())
	for _, r := range x.roots {
		roots = append(roots, r)
	}
	slices.SortFunc(roots, func(a, c int32) int {
		na, nc := x.root(a).ns, x.root(c).ns
		if na.LoRA != nc.LoRA {
			return strings.Compare(na.LoRA, nc.LoRA)
		}
		return strings.Compare(na.Salt, nc.Salt)
	})
	for _, r := range roots {
		ns := x.root(r).ns
		fmt.Fprintf(&b, "  ns lora=%q salt=%q\n", ns.LoRA, ns.Salt)
		x.dumpTree(&b, children, r, 2)
	}
	slices.SortFunc(evictable, func(a, c blocks.ID) int {
		if d := cmp.Compare(x.nodes[nodeOf(a)].lastAccess, x.nodes[nodeOf(c)].lastAccess); d != 0 {
			return d // in LRU order, whatever the policy: the dump is the same for every one
		}
		return cmp.Compare(a, c)
	})
	b.WriteString("  evictable")
	for _, id := range evictable {
		fmt.Fprintf(&b, " %d", id)
	}
	s := x.stats
	fmt.Fprintf(&b, "\n  counters lookups=%d lookedup=%d hittokens=%d inserts=%d duplicates=%d evictions=%d dropped=%d\n",
		s.lookups, s.lookedUp, s.hitTokens, s.inserts, s.duplicates, s.evictions, s.dropped)
	_, err := w.Write(b.Bytes())
	return err
}

func (x *Index) dumpTree(b *bytes.Buffer, children map[int32][]int32, n int32, depth int) {
	for _, c := range children[n] {
		nd := &x.nodes[c]
		id := blockOf(c)
		for range depth {
			b.WriteString("  ")
		}
		// strconv rather than fmt: tests dump often, and the tokens are most of the text.
		b.WriteString("block ")
		b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(id), 10))
		b.WriteString(" tokens=")
		for i, t := range x.blockTokens(c) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(t), 10))
		}
		state := "evictable"
		switch {
		case nd.flags&flagPinned != 0:
			state = "pinned"
		case nd.children > 0:
			state = "inner"
		}
		b.WriteString(" refs=")
		b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(x.pool.RefCount(id)), 10))
		b.WriteString(" " + state + " last=")
		b.Write(strconv.AppendUint(b.AvailableBuffer(), nd.lastAccess, 10))
		b.WriteString(" hits=")
		b.Write(strconv.AppendUint(b.AvailableBuffer(), uint64(x.nodes[c].hits), 10))
		if mm := x.mm[c]; len(mm) > 0 {
			e := x.extraOf(Namespace{}, false, mm)
			fmt.Fprintf(b, " mm=%q", e.MM)
			if e.MMOffsets != nil {
				fmt.Fprintf(b, " mmoff=%d", e.MMOffsets)
			}
		}
		b.WriteByte('\n')
		x.dumpTree(b, children, c, depth+1)
	}
}
