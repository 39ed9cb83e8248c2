package prefix

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQueueOrder(t *testing.T) {
	pool, x := newTestIndex(t, 32)
	admit(t, x, pool, Prompt{Tokens: toks(1, 4*testBS)}).finish(t, x) // 4 blocks cached
	cold := &Prompt{Tokens: toks(500, 3*testBS)}
	warm2 := &Prompt{Tokens: cat(toks(1, 2*testBS), toks(900, 2*testBS))}
	warm4 := &Prompt{Tokens: toks(1, 4*testBS+1)}
	q := []Waiting{{cold, 1}, {warm2, 2}, {cold, 3}, {warm4, 4}, {warm4, 5}}

	for _, c := range []struct {
		name string
		o    QueueOrder
		now  uint64
		want []int
	}{
		{"longest cached prefix first, ties in arrival order", QueueOrder{LeaveOne: true}, 10, []int{3, 4, 1, 0, 2}},
		{"only the window is reordered", QueueOrder{Window: 3, LeaveOne: true}, 10, []int{1, 0, 2, 3, 4}},
		{"aged requests go first, in arrival order", QueueOrder{MaxWait: 8, LeaveOne: true}, 10, []int{0, 1, 3, 4, 2}},
		{"not aged yet", QueueOrder{MaxWait: 10, LeaveOne: true}, 10, []int{3, 4, 1, 0, 2}},
		{"aged exactly at MaxWait", QueueOrder{MaxWait: 9, LeaveOne: true}, 10, []int{0, 3, 4, 1, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := x.Stats()
			require.Equal(t, c.want, c.o.Order(x, q, c.now, nil))
			require.Equal(t, before, x.Stats(), "ordering counts no lookup")
		})
	}
	o := QueueOrder{Window: 4, MaxWait: 3, LeaveOne: true}
	dst := o.Order(x, q, 10, nil)
	require.Zero(t, testing.AllocsPerRun(50, func() { dst = o.Order(x, q, 10, dst[:0]) }))
	require.NoError(t, x.CheckInvariants())
}

// With aging, a cold request behind an endless stream of warm ones is served once it has
// waited MaxWait (one admission per tick, each tick a new warm request arrives).
func TestQueueOrderBoundsTheWait(t *testing.T) {
	pool, x := newTestIndex(t, 32)
	admit(t, x, pool, Prompt{Tokens: toks(1, 4*testBS)}).finish(t, x)
	warm := &Prompt{Tokens: toks(1, 4*testBS+1)}
	for _, maxWait := range []uint64{0, 5, 20} {
		q := []Waiting{{&Prompt{Tokens: toks(500, 3*testBS)}, 0}}
		o := QueueOrder{Window: 8, MaxWait: maxWait, LeaveOne: true}
		served := uint64(0)
		for now := uint64(1); now < 100 && served == 0; now++ {
			q = append(q, Waiting{warm, now})
			first := o.Order(x, q, now, nil)[0]
			if q[first].Since == 0 {
				served = now
			}
			q = append(q[:first], q[first+1:]...)
		}
		if maxWait == 0 {
			require.Zero(t, served, "without aging the cold request starves")
		} else {
			require.Equal(t, maxWait, served)
		}
	}
}

func TestBatchSharing(t *testing.T) {
	pool, x := newTestIndex(t, 32)
	admit(t, x, pool, Prompt{Tokens: toks(1, 2*testBS)}).finish(t, x) // 2 blocks cached
	doc := toks(700, 3*testBS)                                        // an uncached document
	a := &Prompt{Tokens: cat(toks(1, 2*testBS), doc, toks(50, 3))}    // cached 2, then doc
	b := &Prompt{Tokens: cat(toks(1, 2*testBS), doc[:2*testBS], toks(60, 5))}
	c := &Prompt{Tokens: cat(toks(1, 2*testBS), toks(800, 2*testBS))} // its own
	d := &Prompt{Tokens: cat(doc, toks(70, 2))}                       // doc without the cached head
	e := &Prompt{Tokens: cat(doc, toks(80, 2))}
	f := &Prompt{Namespace: Namespace{Salt: "s"}, Tokens: cat(doc, toks(80, 2))}
	var g BatchSharing
	g.LeaveOne = true
	got := g.Group(x, []*Prompt{c, a, d, b, e, f}, nil)
	require.Equal(t, []Share{
		{Leader: 0}, {Leader: 1}, {Leader: 2},
		{Leader: 1, Blocks: 2}, // b shares doc's first two blocks with a
		{Leader: 2, Blocks: 3}, // e shares all of doc with d
		{Leader: 5},            // another namespace never follows
	}, got)
	batch := []*Prompt{c, a, d, b, e, f}
	dst := g.Group(x, batch, nil)
	require.Zero(t, testing.AllocsPerRun(50, func() { dst = g.Group(x, batch, dst[:0]) }))
}
