package blocks

import (
	"testing"

	"pgregory.net/rapid"
)

// TestPoolStateMachine drives random Allocate/Retain/Release/cache/uncache sequences, with
// allocations that make the cache reclaim, against the reference model. After every step
// the harness requires identical results, identical IDs, an identical free-list order and
// refcounts, and CheckInvariants to pass.
func TestPoolStateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		numBlocks := rapid.IntRange(1, 24).Draw(t, "numBlocks")
		hasNull := numBlocks > 1 && rapid.Bool().Draw(t, "hasNull")
		h := newHarness(t, numBlocks, hasNull)
		h.requireAgree(t)

		// anyID draws mostly blocks someone holds (the interesting case), sometimes any ID at
		// all: free, null, negative or past the end.
		anyID := func(t *rapid.T, label string) ID {
			held := h.model.held()
			if len(held) > 0 && rapid.IntRange(0, 3).Draw(t, label+"Kind") > 0 {
				return rapid.SampledFrom(held).Draw(t, label)
			}
			return ID(rapid.IntRange(-2, numBlocks+1).Draw(t, label))
		}
		ids := func(t *rapid.T, label string) []ID {
			n := rapid.IntRange(0, 5).Draw(t, label+"Len")
			out := make([]ID, n)
			for i := range out {
				out[i] = anyID(t, label)
			}
			return out
		}
		capacity := h.model.capacity()

		t.Repeat(map[string]func(*rapid.T){
			"allocate": func(t *rapid.T) {
				n := rapid.IntRange(-1, capacity+1).Draw(t, "n")
				h.apply(t, op{kind: opAllocate, n: n})
			},
			"allocateFewerThanFree": func(t *rapid.T) {
				n := rapid.IntRange(0, max(len(h.model.free), 0)).Draw(t, "n")
				h.apply(t, op{kind: opAllocate, n: n})
			},
			"allocateWithReclaim": func(t *rapid.T) {
				// Between free+1 and free+reclaimable+1: reclaims, or fails by one.
				free := len(h.model.free)
				n := rapid.IntRange(free+1, free+h.model.reclaimable()+1).Draw(t, "n")
				h.apply(t, op{kind: opAllocate, n: n})
			},
			"retain": func(t *rapid.T) {
				h.apply(t, op{kind: opRetain, ids: ids(t, "retain")})
			},
			"release": func(t *rapid.T) {
				h.apply(t, op{kind: opRelease, ids: ids(t, "release")})
			},
			"cache": func(t *rapid.T) {
				h.apply(t, op{kind: opCache, ids: []ID{anyID(t, "cache")}})
			},
			"uncache": func(t *rapid.T) {
				if len(h.model.cached) == 0 {
					t.Skip("nothing cached")
				}
				h.apply(t, op{kind: opUncache, n: rapid.IntRange(0, len(h.model.cached)-1).Draw(t, "i")})
			},
			"": func(t *rapid.T) { h.requireAgree(t) },
		})
	})
}
