package bench

import (
	"fmt"
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/evict"
)

// BenchmarkW4Preempt is blocktable's BenchmarkPreempt on the hybrid Manager of W4 (full
// attention and a 128-token sliding window, one pool): 10, 100 and 1,000 running sequences
// of 100 blocks in each group (the window group keeps its blocks outside the window until
// the sequence's next step frees them, as vLLM's allocate_slots does), block size 16,
// with and without a shared cached prefix (the first 50 blocks of every prompt alike). One
// op admits a new sequence with a prompt of its own and preempts for one block, which takes
// one victim (one op runs before the timer, so that the first Preempt's sizing of its
// plan is not measured). Admission costs the same at every size, so the op's growth from
// 10 to 1,000 running is Preempt's (issue 19's last point: W4's figures beside W3's).
func BenchmarkW4Preempt(b *testing.B) {
	for _, policy := range evict.PreemptionNames() {
		for _, shared := range []bool{false, true} {
			for _, running := range []int{10, 100, 1000} {
				b.Run(fmt.Sprintf("%s/shared=%v/running=%d", policy, shared, running), func(b *testing.B) {
					benchW4Preempt(b, policy, shared, running)
				})
			}
		}
	}
}

func benchW4Preempt(b *testing.B, policy string, shared bool, running int) {
	const held = 100
	p, err := evict.PreemptionByName(policy)
	if err != nil {
		b.Fatal(err)
	}
	m, err := hybrid.New(hybrid.Config{
		Groups: []hybrid.Spec{
			hybrid.FullAttention{Block: BlockSize},
			hybrid.SlidingWindow{Block: BlockSize, Window: W4Window},
		},
		NumBlocks:  (running + 2) * 2 * held,
		Preemption: p,
	})
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, held*BlockSize)
	next := int32(1)
	req := &hybrid.Request{Prompt: prompt, MaxTokens: len(prompt) + BlockSize}
	admit := func(id blocktable.SeqID) {
		i := 0
		if shared {
			i = held / 2 * BlockSize
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
	id := blocktable.SeqID(0)
	for ; id < blocktable.SeqID(running); id++ {
		admit(id)
	}
	var out []blocktable.Preempted
	// One op before the timer: the first Preempt sizes its release plan for the pool, an
	// allocation that would otherwise weigh on the calls measured (most at 1,000 running).
	admit(id)
	id++
	if out, err = m.Preempt(blocktable.PreemptRequest{Need: 1}, out[:0]); err != nil || len(out) != 1 {
		b.Fatal(out, err)
	}
	freed := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		admit(id)
		id++
		if out, err = m.Preempt(blocktable.PreemptRequest{Need: 1}, out[:0]); err != nil || len(out) != 1 {
			b.Fatal(out, err)
		}
		freed += out[0].Freed
	}
	b.ReportMetric(float64(freed)/float64(b.N), "blocks-freed/op")
}
