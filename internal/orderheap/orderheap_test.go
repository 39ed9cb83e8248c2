package orderheap

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

type item struct {
	id, key int
	pos     int32
}

type ops struct{}

func (ops) Before(a, b *item) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return a.id < b.id
}
func (ops) SetPos(e *item, i int32) { e.pos = i }

// check asserts that every element sits at its recorded position and, ordered, after
// its parent; and that a walk of Next returns them in order, changing nothing.
func check(t *rapid.T, h []*item, ordered bool, model map[int]*item) {
	require.Len(t, h, len(model))
	for i, e := range h {
		require.Equal(t, int32(i), e.pos)
		require.Same(t, model[e.id], e)
		if ordered && i > 0 {
			require.False(t, (ops{}).Before(e, h[(i-1)/2]), "child before its parent")
		}
	}
	if !ordered {
		return
	}
	want := slices.Clone(h)
	slices.SortFunc(want, func(a, b *item) int {
		if (ops{}).Before(a, b) {
			return -1
		}
		return 1
	})
	before := slices.Clone(h)
	var f []int32
	if len(h) > 0 {
		f = append(f, 0)
	}
	got := []*item{}
	for {
		e, nf, ok := Next(h, ops{}, f)
		if !ok {
			break
		}
		f = nf
		got = append(got, e)
	}
	require.Equal(t, want, got, "the walk is the order")
	require.Equal(t, before, h, "the walk changes nothing")
}

// TestHeapMachine drives Push, Remove and Fix at random against a map of the elements,
// with and without an order.
func TestHeapMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ordered := rapid.Bool().Draw(t, "ordered")
		var h []*item
		model := map[int]*item{}
		var gone []*item
		next := 0
		for range rapid.IntRange(0, 200).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 3).Draw(t, "op"); {
			case op == 0 || len(model) == 0:
				e := &item{id: next, key: rapid.IntRange(0, 9).Draw(t, "key"), pos: -1}
				next++
				h = Push(h, ops{}, ordered, e)
				model[e.id] = e
			case op == 1:
				e := h[rapid.IntRange(0, len(h)-1).Draw(t, "at")]
				h = Remove(h, ops{}, ordered, e, e.pos)
				require.Equal(t, int32(-1), e.pos)
				require.Nil(t, h[:cap(h)][len(h)], "the freed slot holds no pointer")
				delete(model, e.id)
				gone = append(gone, e)
			case op == 2 && ordered:
				e := h[rapid.IntRange(0, len(h)-1).Draw(t, "at")]
				e.key = rapid.IntRange(0, 9).Draw(t, "newkey")
				Fix(h, ops{}, e, e.pos)
			default: // removing or fixing an element not in the heap changes nothing
				if len(gone) == 0 {
					continue
				}
				e := gone[rapid.IntRange(0, len(gone)-1).Draw(t, "gone")]
				before := slices.Clone(h)
				h = Remove(h, ops{}, ordered, e, e.pos)
				Fix(h, ops{}, e, e.pos)
				require.Equal(t, before, h)
			}
			check(t, h, ordered, model)
		}
	})
}

// Push, Remove, Fix and Next allocate nothing once the slices have grown.
func TestHeapAllocatesNothing(t *testing.T) {
	items := make([]item, 64)
	h := make([]*item, 0, len(items))
	f := make([]int32, 0, len(items))
	allocs := testing.AllocsPerRun(100, func() {
		for i := range items {
			items[i] = item{id: i, key: (i * 7) % 13, pos: -1}
			h = Push(h, ops{}, true, &items[i])
		}
		items[5].key = 100
		Fix(h, ops{}, &items[5], items[5].pos)
		f = append(f[:0], 0)
		for {
			var ok bool
			if _, f, ok = Next(h, ops{}, f); !ok {
				break
			}
		}
		for i := range items {
			h = Remove(h, ops{}, true, &items[i], items[i].pos)
		}
	})
	require.Zero(t, allocs)
}
