package blocktable

import (
	"fmt"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
)

// BenchmarkPreempt measures one preemption among 10, 100 and 1,000 running sequences of
// 100 blocks each (block size 16), by each built-in policy, with and without a shared
// cached prefix (the first 50 blocks of every prompt alike). One op admits a new sequence
// with a prompt of its own (evicting cached blocks of earlier victims as needed) and then
// preempts for one block, which takes one victim: the newest (fcfs, priority), the oldest of
// equal progress (progress), or the cheapest (cost). Admission costs the same at every
// size, so the op's growth from 10 to 1,000 running is Preempt's. ns/op and
// blocks-freed/op are per op.
func BenchmarkPreempt(b *testing.B) {
	for _, policy := range evict.PreemptionNames() {
		for _, shared := range []bool{false, true} {
			for _, running := range []int{10, 100, 1000} {
				b.Run(fmt.Sprintf("%s/shared=%v/running=%d", policy, shared, running), func(b *testing.B) {
					benchPreempt(b, policy, shared, running)
				})
			}
		}
	}
}

func benchPreempt(b *testing.B, policy string, shared bool, running int) {
	const bs, held = 16, 100
	pool, err := blocks.New(running*held+2*held, blocks.WithNullBlock())
	if err != nil {
		b.Fatal(err)
	}
	clock := &evict.Counter{}
	x, err := prefix.New(pool, bs, prefix.WithClock(clock))
	if err != nil {
		b.Fatal(err)
	}
	p, err := evict.PreemptionByName(policy)
	if err != nil {
		b.Fatal(err)
	}
	m, err := New(Config{Pool: pool, Index: x, BlockSize: bs, Clock: clock, Preemption: p})
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, held*bs)
	next := int32(1)
	req := &Request{Prompt: prompt}
	admit := func(id SeqID) {
		i := 0
		if shared {
			i = held / 2 * bs // the shared half keeps tokens 0..
			for j := range prompt[:i] {
				prompt[j] = -int32(j) - 1
			}
		}
		for ; i < len(prompt); i++ {
			prompt[i] = next
			next++
		}
		if _, err := m.Admit(id, req); err != nil {
			b.Fatal(err)
		}
	}
	id := SeqID(0)
	for ; id < SeqID(running); id++ {
		admit(id)
	}
	var out []Preempted
	freed := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		admit(id)
		id++
		if out, err = m.Preempt(PreemptRequest{Need: 1}, out[:0]); err != nil || len(out) != 1 {
			b.Fatal(out, err)
		}
		freed += out[0].Freed
	}
	b.ReportMetric(float64(freed)/float64(b.N), "blocks-freed/op")
}
