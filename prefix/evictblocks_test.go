package prefix

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/stretchr/testify/require"
)

// evictTree caches two prompts that share their first block: A's blocks a0 a1 a2 and B's
// b1 b2 under a0, none held. It returns the index, the pool, the prompts and the blocks
// in that order (a0, a1, a2, b1, b2), with the removals the observer saw.
func evictTree(t *testing.T, opts ...Option) (*Index, *blocks.Pool, [2]Prompt, []blocks.ID, *[]blocks.ID) {
	t.Helper()
	removed := new([]blocks.ID)
	opts = append(opts, WithObserver(&recorder{onRemoved: func(ids []blocks.ID) { *removed = append(*removed, ids...) }}))
	pool, x := newTestIndex(t, 16, opts...)
	a := Prompt{Tokens: toks(0, 3*testBS)}
	b := Prompt{Tokens: cat(toks(0, testBS), toks(100, 2*testBS))}
	ra := admit(t, x, pool, a)
	rb := admit(t, x, pool, b)
	ids := append(append([]blocks.ID{}, ra.ids...), rb.ids[1:]...)
	ra.finish(t, x)
	rb.finish(t, x)
	return x, pool, [2]Prompt{a, b}, ids, removed
}

func TestEvictBlocks(t *testing.T) {
	const a0, a1, a2, b1, b2 = 0, 1, 2, 3, 4 // positions in evictTree's blocks
	tests := []struct {
		name  string
		drop  []int // positions in the tree's blocks; -1 the null block, -2 a free block
		want  []int // dropped, in order
		hitA  int   // blocks Peek then finds of each prompt
		hitB  int
		free  int // blocks the drop puts back on the free list
		event bool
	}{
		{name: "a leaf", drop: []int{a2}, want: []int{a2}, hitA: 2, hitB: 3, free: 1, event: true},
		{name: "an interior block takes the blocks below it", drop: []int{a1}, want: []int{a2, a1}, hitA: 1, hitB: 3, free: 2, event: true},
		{name: "a shared block takes both branches, deepest first", drop: []int{a0}, want: []int{a2, b2, a1, b1, a0}, free: 5, event: true},
		{name: "two branches at once", drop: []int{b2, a1}, want: []int{a2, b2, a1}, hitA: 1, hitB: 2, free: 3, event: true},
		{name: "repeats, the null block and free blocks are ignored", drop: []int{a2, -1, a2, -2}, want: []int{a2}, hitA: 2, hitB: 3, free: 1, event: true},
		{name: "a block below another listed one", drop: []int{a2, a1}, want: []int{a2, a1}, hitA: 1, hitB: 3, free: 2, event: true},
		{name: "nothing cached: no event", drop: []int{-1, -2}, hitA: 3, hitB: 3},
		{name: "no IDs", hitA: 3, hitB: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, pool, ps, ids, removed := evictTree(t)
			var drop, want []blocks.ID
			for _, i := range tt.drop {
				switch i {
				case -1:
					drop = append(drop, blocks.NullID)
				case -2:
					drop = append(drop, blocks.ID(pool.NumBlocks()-1)) // never allocated
				default:
					drop = append(drop, ids[i])
				}
			}
			var hashes []byte
			for _, i := range tt.want {
				want = append(want, ids[i])
				hashes, _ = x.Hash(hashes, ids[i])
			}
			free := pool.NumFree()
			var events []*BlockRemoved
			x.SetObserverForTest(&removedCopier{out: &events})
			dropped, err := x.EvictBlocks([]blocks.ID{99}, drop)
			require.NoError(t, err)
			require.Equal(t, append([]blocks.ID{99}, want...), dropped, "dst keeps what it had")
			require.NoError(t, x.CheckInvariants())
			require.NoError(t, pool.CheckInvariants())
			if tt.event {
				require.Len(t, events, 1, "one BlockRemoved for the call")
				require.Equal(t, want, events[0].Blocks)
				require.Equal(t, hashes, events[0].Hashes, "the hashes the blocks had")
			} else {
				require.Empty(t, events)
			}
			for _, id := range want {
				require.False(t, x.IsCached(id))
			}
			require.Equal(t, uint64(len(want)), x.Stats().Dropped)
			require.Equal(t, 5-len(want), x.Stats().Cached)
			require.Equal(t, free+tt.free, pool.NumFree())
			require.Equal(t, 5-len(want), x.Reclaimable())
			hit, _ := x.Peek(nil, &ps[0], WholePrompt)
			require.Len(t, hit, tt.hitA)
			hit, _ = x.Peek(nil, &ps[1], WholePrompt)
			require.Len(t, hit, tt.hitB)
			require.Empty(t, *removed)
		})
	}
}

// removedCopier keeps a copy of each BlockRemoved.
type removedCopier struct {
	recorder
	out *[]*BlockRemoved
}

func (r *removedCopier) BlockRemoved(e *BlockRemoved) {
	c := *e
	c.Blocks = append([]blocks.ID(nil), e.Blocks...)
	c.Hashes = append([]byte(nil), e.Hashes...)
	*r.out = append(*r.out, &c)
}

func TestEvictBlocksRefusesIDsOutsideThePool(t *testing.T) {
	for _, bad := range []blocks.ID{-1, 16, 1 << 30} {
		t.Run(fmt.Sprint(bad), func(t *testing.T) {
			x, pool, _, ids, removed := evictTree(t)
			before := snap(x, pool)
			dropped, err := x.EvictBlocks(nil, []blocks.ID{ids[0], bad})
			require.True(t, errors.Is(err, ErrInvalidArgument), "%v", err)
			var be *BlockError
			require.True(t, errors.As(err, &be))
			require.Equal(t, bad, be.ID)
			require.Empty(t, dropped)
			require.Equal(t, before, snap(x, pool), "nothing changed")
			require.True(t, x.IsCached(ids[0]), "not even the valid block before the bad one")
			require.Empty(t, *removed)
			require.NoError(t, x.CheckInvariants())
		})
	}
}

// A held block leaves the cache but stays with its holder, as vLLM keeps a block with
// ref_cnt > 0 allocated: it goes back to the pool when the request releases it, and a
// commit past it finds its prefix gone.
func TestEvictBlocksHeldBlockStaysWithItsHolder(t *testing.T) {
	pool, x := newTestIndex(t, 16)
	r := admit(t, x, pool, Prompt{Tokens: toks(0, 3*testBS+1)}) // 3 full blocks and a partial one
	free := pool.NumFree()
	dropped, err := x.EvictBlocks(nil, r.ids[1:2])
	require.NoError(t, err)
	require.Equal(t, []blocks.ID{r.ids[2], r.ids[1]}, dropped)
	require.Equal(t, free, pool.NumFree(), "held blocks stay allocated")
	require.Equal(t, 1, pool.RefCount(r.ids[1]), "the request's reference only")
	require.Equal(t, 0, x.Reclaimable(), "block 0 is still held")
	require.NoError(t, x.CheckInvariants())

	// The request decodes on: its next full block has no cached prefix to hang under.
	r.p.Tokens = append(r.p.Tokens, toks(50, testBS-1)...)
	res, err := x.Commit(&r.cur, &r.p, r.ids[3:4])
	require.NoError(t, err)
	require.Equal(t, CommitResult{Orphaned: 1}, res)

	r.finish(t, x)
	require.Equal(t, free+3, pool.NumFree(), "the dropped and the orphaned blocks are free again")
	require.Equal(t, 1, x.Reclaimable())
	require.NoError(t, x.CheckInvariants())
	require.NoError(t, pool.CheckInvariants())
}

// A held block whose parent nothing holds keeps the parent pinned; dropping it unpins the
// parent, which becomes evictable.
func TestEvictBlocksUnpinsAParentHeldOnlyThroughTheBlock(t *testing.T) {
	x, pool, _, ids, _ := evictTree(t)
	require.NoError(t, x.Acquire(ids[2:3])) // a2 alone: a0 and a1 pinned above it
	require.Equal(t, 2, x.Reclaimable(), "b1 and b2")
	_, err := x.EvictBlocks(nil, ids[2:3])
	require.NoError(t, err)
	require.Equal(t, 4, x.Reclaimable(), "a0 and a1 are unpinned again")
	require.NoError(t, x.CheckInvariants())
	require.Equal(t, 4, x.Evict(16))
	require.NoError(t, x.Release(ids[2:3]))
	require.Equal(t, pool.Capacity(), pool.NumFree())
}

// A pinned block stays pinned when dropped, out of the cache, until Unpin.
func TestEvictBlocksKeepsPins(t *testing.T) {
	x, pool, _, ids, _ := evictTree(t, WithPinBudget(4))
	got, err := x.Pin(ids[:3])
	require.NoError(t, err)
	require.Equal(t, 3, got.Granted)
	_, err = x.EvictBlocks(nil, ids[1:2])
	require.NoError(t, err)
	require.Equal(t, 1, x.Pins(ids[1]))
	require.Equal(t, 3, x.Pinned())
	require.NoError(t, x.CheckInvariants())
	free := pool.NumFree()
	require.NoError(t, x.Unpin(ids[:3]))
	require.Equal(t, free+2, pool.NumFree(), "a1 and a2 go back to the pool")
	require.NoError(t, x.CheckInvariants())
}

// vLLM's test_invalid_blocks_evicted_prevents_cache_pollution: a request of 100 blocks
// has 99 computed and cached, block 50 fails to load, and the scheduler evicts it and
// every block after it. Blocks 0-49 stay cached, 50-98 leave; here listing block 50 alone
// has the same outcome, since the blocks after it hang below it.
func TestEvictBlocksVLLMInvalidBlockPollution(t *testing.T) {
	const numPrompt, numComputed, invalid = 100, 99, 50
	for _, tail := range []bool{true, false} {
		t.Run(fmt.Sprintf("list the blocks after it too: %v", tail), func(t *testing.T) {
			pool, err := blocks.New(128, blocks.WithNullBlock())
			require.NoError(t, err)
			x, err := New(pool, testBS)
			require.NoError(t, err)
			p := Prompt{Tokens: toks(1, numPrompt*testBS)}
			ids, err := pool.Allocate(nil, numPrompt)
			require.NoError(t, err)
			var cur Cursor
			_, err = x.Commit(&cur, &p, ids[:numComputed])
			require.NoError(t, err)
			drop := ids[invalid : invalid+1]
			if tail {
				drop = ids[invalid:]
			}
			dropped, err := x.EvictBlocks(nil, drop)
			require.NoError(t, err)
			require.Len(t, dropped, numComputed-invalid)
			for i, id := range ids {
				require.Equal(t, i < invalid, x.IsCached(id), "block %d", i)
			}
			hit, _ := x.Peek(nil, &p, WholePrompt)
			require.Equal(t, ids[:invalid], hit)
			require.NoError(t, x.CheckInvariants())
		})
	}
}

func TestEvictBlocksRecordsTheCause(t *testing.T) {
	x, _, ps, ids, _ := evictTree(t, WithEvictionHistory(16))
	_, err := x.EvictBlocks(nil, ids[1:2])
	require.NoError(t, err)
	var e Explanation
	hit, _ := x.Explain(nil, &ps[0], LookupOptions{}, &e)
	require.Len(t, hit, 1)
	require.Equal(t, MissEvicted, e.Reason)
	require.Equal(t, EvictDropped, e.Evicted)
	require.Equal(t, "dropped", EvictDropped.String())
}

// With lower tiers, a copy in flight refuses the call (as Reset does); once it is
// confirmed the device's block is dropped and the host's copy stays findable.
func TestEvictBlocksWithTiers(t *testing.T) {
	pool, x := newTestIndex(t, 8, WithTiers(TierConfig{Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 8, Write: WriteThrough}}, BlockBytes: 1}))
	r := admit(t, x, pool, Prompt{Tokens: toks(0, 2*testBS)})
	r.finish(t, x)
	before := snap(x, pool)
	_, err := x.EvictBlocks(nil, r.ids[:1])
	require.True(t, errors.Is(err, ErrTransfersPending), "%v", err)
	require.Equal(t, before, snap(x, pool))
	for _, pl := range x.TakePlans(nil) {
		_, err := x.CompleteTransfer(pl.ID, true)
		require.NoError(t, err)
	}
	dropped, err := x.EvictBlocks(nil, r.ids[:1])
	require.NoError(t, err)
	require.Equal(t, []blocks.ID{r.ids[1], r.ids[0]}, dropped)
	require.NoError(t, x.CheckInvariants())
	hit, cur := x.Peek(nil, &r.p, WholePrompt)
	require.Empty(t, hit)
	require.Equal(t, 2, x.PeekLower(&r.p, cur, WholePrompt, 0).Lower, "the host's copies stay")
}
