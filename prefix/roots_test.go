package prefix

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rootSlots is the number of namespace root slots the index has, live or free.
func rootSlots(x *Index) int { return len(x.nodes) - x.nb - 1 }

// salted is a namespace of its own for tenant i.
func salted(i int) Namespace { return Namespace{Salt: "tenant-" + strconv.Itoa(i)} }

// TestNamespacesComeAndGo runs 10,000 tenants through the index, each with its own cache
// salt, a few live at a time: every tenant's root is freed once its blocks are evicted
// (and a tenant that never committed gets none) and its slot is reused, so the root slots, rootInfo, hints and the map stay at the peak number of live
// namespaces instead of growing with every tenant ever seen.
func TestNamespacesComeAndGo(t *testing.T) {
	const tenants = 10000
	tests := []struct {
		name string
		live int // tenants with cached blocks at once
		// commit: the tenant's prompt fills blocks that are committed; otherwise it is
		// shorter than a block and the tenant never gets a root.
		commit bool
		// maxSlots is the peak number of live namespaces: a new tenant caches its blocks
		// before the oldest one's are evicted.
		maxSlots int
	}{
		{name: "one at a time", live: 1, commit: true, maxSlots: 2},
		{name: "eight at a time", live: 8, commit: true, maxSlots: 9},
		{name: "never committed", live: 1, commit: false, maxSlots: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool, x := newTestIndex(t, 1+3*(tc.live+1))
			var window []Namespace
			for i := range tenants {
				ns := salted(i)
				if tc.commit {
					admit(t, x, pool, Prompt{Namespace: ns, Tokens: toks(int32(i), 3*testBS)}).finish(t, x)
				} else {
					var c Cursor
					_, err := x.Commit(&c, &Prompt{Namespace: ns, Tokens: toks(1, testBS-1)}, nil)
					require.NoError(t, err)
				}
				window = append(window, ns)
				if !tc.commit {
					window = window[:0] // nothing committed: no root
				}
				if len(window) > tc.live && tc.commit {
					// The oldest tenant leaves: its three blocks are the LRU victims.
					require.Equal(t, 3, x.Evict(3))
					got, _ := x.Peek(nil, &Prompt{Namespace: window[0], Tokens: toks(1, 3*testBS)}, WholePrompt)
					require.Empty(t, got)
					window = window[1:]
				}
				require.LessOrEqual(t, rootSlots(x), tc.maxSlots, "tenant %d", i)
				if i%1000 == 0 {
					require.NoError(t, x.CheckInvariants(), "tenant %d", i)
				}
			}
			require.NoError(t, x.CheckInvariants())
			assert.Len(t, x.rootInfo, rootSlots(x))
			assert.Equal(t, len(window), x.Stats().Namespaces)
			assert.Len(t, x.roots, x.Stats().Namespaces)
			assert.Equal(t, pool.NumBlocks()+1+tc.maxSlots, len(x.nodes), "the slots that were needed, no more")
			require.NoError(t, x.Reset())
			assert.Zero(t, x.Stats().Namespaces)
			assert.Empty(t, x.roots)
			assert.Len(t, x.freeRoots, rootSlots(x))
			require.NoError(t, x.CheckInvariants())
		})
	}
}

// TestRootFreedWithItsLastBlock pins exactly when a root goes: not while any block of its
// namespace is cached, at once when the last one is evicted, and with its strings.
func TestRootFreedWithItsLastBlock(t *testing.T) {
	pool, x := newTestIndex(t, 16)
	ns := Namespace{LoRA: "sql", Salt: "alice"}
	admit(t, x, pool, Prompt{Namespace: ns, Tokens: toks(1, 2*testBS)}).finish(t, x)
	admit(t, x, pool, Prompt{Namespace: ns, Tokens: cat(toks(1, testBS), toks(90, testBS))}).finish(t, x)
	r := x.rootOf(ns)
	require.NotZero(t, r)
	gen := x.nodes[r].gen
	for left := 3; left > 0; left-- {
		assert.Equal(t, r, x.rootOf(ns), "%d blocks left", left)
		require.Equal(t, 1, x.Evict(1))
	}
	assert.Zero(t, x.rootOf(ns))
	assert.Greater(t, x.nodes[r].gen, gen, "freeing gives the slot a new generation")
	assert.Equal(t, x.gens, x.nodes[r].gen, "the newest one")
	assert.Equal(t, rootInfo{}, *x.root(r), "the namespace's strings are dropped")
	assert.Equal(t, []int32{r}, x.freeRoots)
	assert.Zero(t, x.Stats().Namespaces)
	require.NoError(t, x.CheckInvariants())
	var buf strings.Builder
	require.NoError(t, x.WriteState(&buf))
	assert.Contains(t, buf.String(), " namespaces=0 ")
	assert.NotContains(t, buf.String(), "alice")
}

// TestResetFreesRoots: Reset frees every root, the default one included, and the next
// namespaces take the freed slots.
func TestResetFreesRoots(t *testing.T) {
	pool, x := newTestIndex(t, 32)
	for _, ns := range []Namespace{{}, {LoRA: "a"}, {Salt: "s"}} {
		admit(t, x, pool, Prompt{Namespace: ns, Tokens: toks(1, 2*testBS)}).finish(t, x)
	}
	require.Equal(t, 3, x.Stats().Namespaces)
	require.NoError(t, x.Reset())
	assert.Zero(t, x.Stats().Namespaces)
	assert.Zero(t, x.defRoot)
	assert.Len(t, x.freeRoots, 3)
	require.NoError(t, x.CheckInvariants())
	for _, ns := range []Namespace{{LoRA: "b"}, {Salt: "t"}, {}, {LoRA: "a"}, {Salt: "u"}} {
		admit(t, x, pool, Prompt{Namespace: ns, Tokens: toks(1, 2*testBS)}).finish(t, x)
	}
	assert.Equal(t, 5, rootSlots(x), "three slots reused, two added")
	assert.Equal(t, 5, x.Stats().Namespaces)
	require.NoError(t, x.CheckInvariants())
}

// TestNoRootWithoutCommit: roots are created by the first block a namespace commits, never
// by a lookup, an empty commit or a failed one, so that no root is ever childless.
func TestNoRootWithoutCommit(t *testing.T) {
	pool, x := newTestIndex(t, 16)
	a := Namespace{Salt: "a"}
	p := Prompt{Namespace: a, Tokens: toks(1, testBS)}
	_, c := x.Peek(nil, &p, WholePrompt)
	assert.Equal(t, Cursor{}, c, "a namespace with nothing cached matches at the zero Cursor")
	_, err := x.Commit(&c, &Prompt{Namespace: a, Tokens: toks(1, testBS-1)}, nil)
	require.NoError(t, err)
	ids, err := pool.Allocate(nil, 1)
	require.NoError(t, err)
	_, err = x.Commit(&c, &Prompt{Namespace: a, Tokens: toks(1, testBS-1)}, ids)
	assert.ErrorIs(t, err, ErrLengthMismatch)
	assert.Zero(t, x.Stats().Namespaces, "no lookup or failed commit creates a root")
	assert.Empty(t, x.freeRoots, "nor takes a slot")
	require.NoError(t, x.CheckInvariants())

	res, err := x.Commit(&c, &p, ids)
	require.NoError(t, err)
	assert.Equal(t, CommitResult{Stored: 1}, res)
	assert.Equal(t, 1, x.Stats().Namespaces)
	got, _ := x.Peek(nil, &p, WholePrompt)
	assert.Equal(t, ids, got)
	require.NoError(t, x.Release(ids))
	require.Equal(t, 1, x.Evict(1))
	assert.Zero(t, x.Stats().Namespaces, "the root goes with the namespace's last block")
	require.NoError(t, x.CheckInvariants())
}

// TestStaleCursorAtFreedRoot: a sequence's cursor whose namespace root was freed (its
// blocks evicted, or Reset) and whose slot another namespace may have taken commits under
// its own namespace, found again from the prompt, and never under the slot's new owner.
func TestStaleCursorAtFreedRoot(t *testing.T) {
	mine, theirs := Namespace{Salt: "mine"}, Namespace{Salt: "theirs"}
	tests := []struct {
		name string
		// free frees mine's root; the cursor at the root (or at its first block) goes stale.
		free func(t *testing.T, x *Index)
		// reuse: theirs caches a block with the very tokens of mine's next block, after
		// the free, in mine's old slot.
		reuse bool
		// atBlock: the cursor stands on a block of mine (a duplicate, not held) rather
		// than on the root.
		atBlock bool
		want    CommitResult
	}{
		{name: "root freed by Reset", free: func(t *testing.T, x *Index) { require.NoError(t, x.Reset()) }, want: CommitResult{Stored: 1}},
		{name: "root freed by Reset, slot reused", free: func(t *testing.T, x *Index) { require.NoError(t, x.Reset()) }, reuse: true, want: CommitResult{Stored: 1}},
		{name: "root freed by eviction, slot reused", free: func(t *testing.T, x *Index) { x.Evict(100) }, reuse: true, want: CommitResult{Stored: 1}},
		{name: "cursor on an evicted duplicate, slot reused", free: func(t *testing.T, x *Index) { x.Evict(100) }, reuse: true, atBlock: true, want: CommitResult{Orphaned: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool, x := newTestIndex(t, 32)
			tk := toks(7, 2*testBS)
			p := Prompt{Namespace: mine, Tokens: tk}
			var cur Cursor
			var held []blocks.ID
			if tc.atBlock {
				// Another request of mine caches both blocks; ours commits its first block as
				// a duplicate, so its cursor stands on the other request's copy.
				other := admit(t, x, pool, Prompt{Namespace: mine, Tokens: tk})
				ids, err := pool.Allocate(nil, 1)
				require.NoError(t, err)
				res, err := x.Commit(&cur, &p, ids) // the zero Cursor: at mine's root
				require.NoError(t, err)
				require.Equal(t, CommitResult{Duplicates: 1}, res)
				other.finish(t, x)
				held = ids
			} else {
				admit(t, x, pool, Prompt{Namespace: mine, Tokens: toks(100, testBS)}).finish(t, x)
				_, cur = x.Peek(nil, &p, WholePrompt) // no hit: a cursor at mine's live root
			}
			slot := x.rootOf(mine)
			tc.free(t, x)
			require.Zero(t, x.rootOf(mine))
			if tc.reuse {
				admit(t, x, pool, Prompt{Namespace: theirs, Tokens: tk}).finish(t, x)
				require.Equal(t, slot, x.rootOf(theirs), "theirs took mine's old slot")
			}
			theirsBefore := cacheState(t, x, theirs)

			next, err := pool.Allocate(nil, 1)
			require.NoError(t, err)
			b := cur.Blocks()
			res, err := x.Commit(&cur, &Prompt{Namespace: mine, Tokens: tk[:(b+1)*testBS]}, next)
			require.NoError(t, err)
			assert.Equal(t, tc.want, res)
			assert.Equal(t, b+1, cur.Blocks())
			if tc.want.Stored == 1 {
				got, _ := x.Peek(nil, &Prompt{Namespace: mine, Tokens: tk[:testBS]}, WholePrompt)
				assert.Equal(t, next, got, "committed under mine")
				if tc.reuse {
					assert.NotEqual(t, slot, x.rootOf(mine), "in a root of its own")
				}
			}
			assert.Equal(t, theirsBefore, cacheState(t, x, theirs), "nothing committed under theirs")
			require.NoError(t, x.CheckInvariants())
			require.NoError(t, x.Release(append(held, next...)))
			x.Evict(100)
			assert.Equal(t, pool.Capacity(), pool.NumFree(), "nothing leaked")
			assert.Zero(t, x.Stats().Namespaces)
			require.NoError(t, x.CheckInvariants())
		})
	}
}

// cacheState describes what ns has cached: its blocks along every path Match can see,
// through the dump, which lists each namespace's tree.
func cacheState(t *testing.T, x *Index, ns Namespace) string {
	t.Helper()
	var buf strings.Builder
	require.NoError(t, x.WriteState(&buf))
	head := fmt.Sprintf("  ns lora=%q salt=%q\n", ns.LoRA, ns.Salt)
	s := buf.String()
	i := strings.Index(s, head)
	if i < 0 {
		return ""
	}
	s = s[i+len(head):]
	end := strings.Index(s, "\n  ns ")
	if end < 0 {
		end = strings.Index(s, "\n  evictable")
	}
	return s[:end]
}

// A failed Commit that had to create its namespace's root leaves the root slots exactly
// as they were, free list included.
func TestFailedCommitDropsItsNewRoot(t *testing.T) {
	pool, x := newTestIndex(t, 16)
	admit(t, x, pool, Prompt{Namespace: Namespace{Salt: "gone"}, Tokens: toks(1, testBS)}).finish(t, x)
	x.Evict(1)
	require.Len(t, x.freeRoots, 1)
	ids, err := pool.Allocate(nil, 1)
	require.NoError(t, err)
	var c Cursor
	nodes, free := len(x.nodes), append([]int32(nil), x.freeRoots...)
	gen := x.nodes[free[0]].gen
	_, err = x.Commit(&c, &Prompt{Namespace: Namespace{Salt: "new"}, Tokens: toks(1, 2*testBS)}, []blocks.ID{ids[0], ids[0]})
	assert.ErrorIs(t, err, ErrAlreadyCached)
	assert.Equal(t, nodes, len(x.nodes))
	assert.Equal(t, free, x.freeRoots)
	assert.Equal(t, gen, x.nodes[free[0]].gen)
	assert.Zero(t, x.Stats().Namespaces)
	require.NoError(t, x.CheckInvariants())
	require.NoError(t, pool.Release(ids...))
}

// CheckInvariants must notice each way the root slots can be corrupted.
func TestCheckInvariantsCatchesRootCorruption(t *testing.T) {
	build := func(t *testing.T) *Index {
		pool, x := newTestIndex(t, 32)
		admit(t, x, pool, Prompt{Namespace: Namespace{Salt: "gone"}, Tokens: toks(1, testBS)}).finish(t, x)
		require.Equal(t, 1, x.Evict(1))
		admit(t, x, pool, Prompt{Namespace: Namespace{LoRA: "a"}, Tokens: toks(1, testBS)}).finish(t, x)
		admit(t, x, pool, Prompt{Tokens: toks(1, testBS)}).finish(t, x)
		require.Len(t, x.freeRoots, 0)
		x.Evict(1) // the LoRA namespace's block: its root is freed
		require.Len(t, x.freeRoots, 1)
		require.NoError(t, x.CheckInvariants())
		return x
	}
	free := func(x *Index) int32 { return x.freeRoots[0] }
	corruptions := map[string]func(x *Index){
		"free slot also live":       func(x *Index) { x.nodes[free(x)].flags = flagRoot },
		"free slot in the map":      func(x *Index) { x.roots[Namespace{Salt: "ghost"}] = free(x) },
		"free slot keeps strings":   func(x *Index) { x.root(free(x)).ns = Namespace{LoRA: "a"} },
		"free slot has a hint":      func(x *Index) { x.nodes[free(x)].hint = x.nodes[x.defRoot].hint },
		"free slot listed twice":    func(x *Index) { x.freeRoots = append(x.freeRoots, free(x)) },
		"free slot not listed":      func(x *Index) { x.freeRoots = x.freeRoots[:0] },
		"live root listed as free":  func(x *Index) { x.freeRoots = append(x.freeRoots, x.defRoot) },
		"live root not in the map":  func(x *Index) { delete(x.roots, Namespace{}) },
		"default root mislaid":      func(x *Index) { x.defRoot = 0 },
		"childless root":            func(x *Index) { x.ensureRoot(Namespace{Salt: "idle"}) },
		"rootInfo longer than slot": func(x *Index) { x.rootInfo = append(x.rootInfo, rootInfo{}) },
	}
	for name, corrupt := range corruptions {
		t.Run(name, func(t *testing.T) {
			x := build(t)
			corrupt(x)
			assert.Error(t, x.CheckInvariants())
		})
	}
}
