package blocks

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func queued(q *FreeQueue) []ID { return slices.Collect(q.All()) }

// vLLM's FreeKVCacheBlockQueue order: ascending at first, a freed block at the end, a
// hit unlinked from the middle, and (newer order) an uncached block at the front.
func TestFreeQueueOrder(t *testing.T) {
	q, err := NewFreeQueue(6)
	require.NoError(t, err)
	require.Equal(t, []ID{1, 2, 3, 4, 5}, queued(q))
	a, _ := q.Pop()
	b, _ := q.Pop()
	require.Equal(t, []ID{1, 2}, []ID{a, b})
	require.NoError(t, q.Release(a))
	require.Equal(t, []ID{3, 4, 5, 1}, queued(q))
	require.NoError(t, q.Retain(4)) // a hit on a queued block takes it from the middle
	require.Equal(t, []ID{3, 5, 1}, queued(q))
	require.Equal(t, 1, q.RefCount(4))
	require.NoError(t, q.Retain(4))
	require.NoError(t, q.Release(4))
	require.Equal(t, []ID{3, 5, 1}, queued(q), "a block still held stays out")
	require.NoError(t, q.ReleaseToFront(4))
	require.Equal(t, []ID{4, 3, 5, 1}, queued(q))
	require.Equal(t, ID(4), q.Front())
	require.Equal(t, 4, q.Len())
	require.NoError(t, q.CheckInvariants())
}

func TestFreeQueueBadInputChangesNothing(t *testing.T) {
	q, err := NewFreeQueue(3)
	require.NoError(t, err)
	for _, n := range []int{-1, 0, 1, 1 << 31} {
		_, err := NewFreeQueue(n)
		require.ErrorIs(t, err, ErrInvalidArgument, "%d blocks", n)
	}
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"release a free block", func() error { return q.Release(1) }, ErrDoubleFree},
		{"release to front a free block", func() error { return q.ReleaseToFront(2) }, ErrDoubleFree},
		{"release the null block", func() error { return q.Release(NullID) }, ErrNullBlock},
		{"retain the null block", func() error { return q.Retain(NullID) }, ErrNullBlock},
		{"retain an unknown block", func() error { return q.Retain(3) }, ErrUnknownBlock},
		{"release a negative block", func() error { return q.Release(-1) }, ErrUnknownBlock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var be *BlockError
			err := tc.call()
			require.ErrorIs(t, err, tc.want)
			require.ErrorAs(t, err, &be)
			require.Equal(t, []ID{1, 2}, queued(q))
			require.NoError(t, q.CheckInvariants())
		})
	}
	_, _ = q.Pop()
	_, _ = q.Pop()
	id, err := q.Pop()
	require.ErrorIs(t, err, ErrOutOfBlocks)
	require.Equal(t, NullID, id)
	require.Equal(t, NullID, q.Front())
	q.b[1].ref = MaxRefCount
	require.ErrorIs(t, q.Retain(1), ErrRefCountOverflow)
	require.Equal(t, MaxRefCount, q.RefCount(1))
}

func TestFreeQueueAllocatesNothing(t *testing.T) {
	q, err := NewFreeQueue(64)
	require.NoError(t, err)
	failed := 0 // counted, so that a call failing early cannot make the test pass vacuously
	check := func(err error) {
		if err != nil {
			failed++
		}
	}
	table := make([]ID, 0, 8)
	allocs := testing.AllocsPerRun(100, func() {
		a, err := q.Pop()
		check(err)
		b, err := q.Pop()
		check(err)
		check(q.Retain(a))
		check(q.Release(a))
		check(q.Release(a))
		check(q.ReleaseToFront(b))
		check(q.Retain(b)) // from the front
		check(q.Release(b))
		table, err = q.Allocate(table[:0], 8)
		check(err)
		check(q.RetainTable(table))
		check(q.ReleaseTable(table))
		check(q.ReleaseTable(table))
	})
	require.Zero(t, failed)
	require.Zero(t, allocs)
	require.Equal(t, 63, q.Len())
	require.NoError(t, q.CheckInvariants())
}

func TestFreeQueueCheckInvariantsCatchesCorruption(t *testing.T) {
	for name, corrupt := range map[string]func(q *FreeQueue){
		"held block queued":   func(q *FreeQueue) { q.b[2].ref = 1 },
		"queued block missed": func(q *FreeQueue) { q.b[1].next = 3; q.b[3].prev = 1 },
		"count off":           func(q *FreeQueue) { q.n++ },
		"negative refcount":   func(q *FreeQueue) { q.b[3].ref = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			q, err := NewFreeQueue(5)
			require.NoError(t, err)
			corrupt(q)
			require.Error(t, q.CheckInvariants())
		})
	}
}

// TestFreeQueueStateMachine drives random pops, retains and releases against a reference
// model (a slice in queue order and a refcount per block), and requires the same results,
// the same order and refcounts, and CheckInvariants, after every step.
func TestFreeQueueStateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 12).Draw(t, "numBlocks")
		q, err := NewFreeQueue(n)
		require.NoError(t, err)
		order := []ID{}
		for i := 1; i < n; i++ {
			order = append(order, ID(i))
		}
		refs := make([]int, n)
		anyID := func(t *rapid.T) ID { return ID(rapid.IntRange(-1, n).Draw(t, "id")) }
		valid := func(id ID) bool { return id > 0 && int(id) < n }
		remove := func(id ID) {
			order = slices.DeleteFunc(order, func(x ID) bool { return x == id })
		}
		t.Repeat(map[string]func(*rapid.T){
			"pop": func(t *rapid.T) {
				id, err := q.Pop()
				if len(order) == 0 {
					require.ErrorIs(t, err, ErrOutOfBlocks)
					return
				}
				require.NoError(t, err)
				require.Equal(t, order[0], id)
				order = order[1:]
				refs[id] = 1
			},
			"retain": func(t *rapid.T) {
				id := anyID(t)
				err := q.Retain(id)
				if !valid(id) {
					require.Error(t, err)
					return
				}
				require.NoError(t, err)
				if refs[id] == 0 {
					remove(id)
				}
				refs[id]++
			},
			"release": func(t *rapid.T) {
				id, front := anyID(t), rapid.Bool().Draw(t, "front")
				release := q.Release
				if front {
					release = q.ReleaseToFront
				}
				err := release(id)
				if !valid(id) || refs[id] == 0 {
					require.Error(t, err)
					return
				}
				require.NoError(t, err)
				if refs[id]--; refs[id] == 0 {
					if front {
						order = append([]ID{id}, order...)
					} else {
						order = append(order, id)
					}
				}
			},
			"allocate": func(t *rapid.T) {
				k := rapid.IntRange(-1, n).Draw(t, "n")
				got, err := q.Allocate(nil, k)
				if k < 0 || k > len(order) {
					require.Error(t, err)
					require.Empty(t, got)
					return
				}
				require.NoError(t, err)
				require.Equal(t, order[:k], append([]ID{}, got...))
				for _, id := range got {
					refs[id] = 1
				}
				order = order[k:]
			},
			"releaseTable": func(t *rapid.T) {
				ids := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) ID { return ID(rapid.IntRange(0, n-1).Draw(t, "id")) }), 0, 4).Draw(t, "ids")
				after := append([]int(nil), refs...)
				var joined []ID
				ok := true
				for i := len(ids) - 1; i >= 0; i-- {
					if id := ids[i]; id != NullID {
						if after[id] == 0 {
							ok = false
							break
						}
						if after[id]--; after[id] == 0 {
							joined = append(joined, id)
						}
					}
				}
				err := q.ReleaseTable(ids)
				if !ok {
					require.ErrorIs(t, err, ErrDoubleFree)
					return
				}
				require.NoError(t, err)
				refs, order = after, append(order, joined...)
			},
			"retainTable": func(t *rapid.T) {
				ids := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) ID { return ID(rapid.IntRange(0, n).Draw(t, "id")) }), 0, 4).Draw(t, "ids")
				err := q.RetainTable(ids)
				for _, id := range ids {
					if int(id) >= n {
						require.ErrorIs(t, err, ErrUnknownBlock)
						return
					}
				}
				require.NoError(t, err)
				for _, id := range ids {
					if id == NullID {
						continue
					}
					if refs[id] == 0 {
						remove(id)
					}
					refs[id]++
				}
			},
			"": func(t *rapid.T) {
				require.NoError(t, q.CheckInvariants())
				require.Equal(t, order, append([]ID{}, queued(q)...))
				require.Equal(t, len(order), q.Len())
				for id := range n {
					require.Equal(t, refs[id], q.RefCount(ID(id)))
				}
			},
		})
	})
}

// The batch forms are the single ones in order, and all or nothing.
func TestFreeQueueBatches(t *testing.T) {
	q, err := NewFreeQueue(8)
	require.NoError(t, err)
	got, err := q.Allocate(nil, 4)
	require.NoError(t, err)
	require.Equal(t, []ID{1, 2, 3, 4}, got)
	_, err = q.Allocate(got, 4)
	require.ErrorIs(t, err, ErrOutOfBlocks)
	_, err = q.Allocate(nil, -1)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Equal(t, []ID{5, 6, 7}, queued(q))

	// A table with a null entry (outside a window) is released last first.
	require.NoError(t, q.ReleaseTable([]ID{NullID, 2, 3, 4}))
	require.Equal(t, []ID{5, 6, 7, 4, 3, 2}, queued(q))
	// A hit takes the cached blocks back from the middle, in order.
	require.NoError(t, q.RetainTable([]ID{NullID, 3, 4, 1}))
	require.Equal(t, []ID{5, 6, 7, 2}, queued(q))
	require.Equal(t, 2, q.RefCount(1))

	before := queued(q)
	require.ErrorIs(t, q.ReleaseTable([]ID{1, 3, 3}), ErrDoubleFree, "3 is held once")
	require.Equal(t, before, queued(q))
	require.Equal(t, []int{2, 1, 1}, []int{q.RefCount(1), q.RefCount(3), q.RefCount(4)})
	require.ErrorIs(t, q.RetainTable([]ID{3, 9}), ErrUnknownBlock)
	require.Equal(t, 1, q.RefCount(3))
	require.NoError(t, q.CheckInvariants())
}
