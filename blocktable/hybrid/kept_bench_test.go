package hybrid_test

import (
	"fmt"
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
)

// BenchmarkStreamOrderedCompletion is a server's swap loop under StreamOrdered with
// inFlight stores outstanding: each iteration admits a sequence of 4 full blocks, swaps it
// out (its blocks demoted), hands its store out (TakePlans: the 4 blocks kept cached until
// the store completes), completes the oldest store outstanding and finishes that
// sequence. The kept list then holds about 4 x inFlight blocks, and each completion
// settles its own 4 of them.
func BenchmarkStreamOrderedCompletion(b *testing.B) {
	for _, inFlight := range []int{1, 10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("inflight=%d", inFlight), func(b *testing.B) {
			const bs, full = 4, 4
			m, err := hybrid.New(hybrid.Config{Groups: []hybrid.Spec{hybrid.FullAttention{Block: bs}},
				NumBlocks: 64, Tiers: &prefix.TierConfig{Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU,
					Capacity: full*(inFlight+2) + 16, Write: prefix.WriteBack}}, BlockBytes: 64, StreamOrdered: true}})
			if err != nil {
				b.Fatal(err)
			}
			prompt := make([]int32, full*bs+1)
			var plans []prefix.Plan
			var ring []prefix.TransferID // stores outstanding, oldest first
			var seqs []blocktable.SeqID
			req := hybrid.Request{Prompt: prompt, MaxTokens: len(prompt) + 4}
			step := func(i int) {
				for j := range prompt {
					prompt[j] = int32(i*len(prompt) + j) // no sharing
				}
				id := blocktable.SeqID(i)
				if _, err := m.Admit(id, &req); err != nil {
					b.Fatal(err)
				}
				if _, err := m.PreemptSeq(id, blocktable.Swap); err != nil {
					b.Fatal(err)
				}
				plans = m.TakePlans(plans[:0])
				for _, p := range plans {
					ring = append(ring, p.ID)
				}
				seqs = append(seqs, id)
				if len(seqs) > inFlight {
					for len(ring) > 0 && len(ring) >= len(seqs) {
						if _, err := m.CompleteTransfer(ring[0], true); err != nil {
							b.Fatal(err)
						}
						ring = ring[1:]
					}
					if err := m.Finish(seqs[0]); err != nil {
						b.Fatal(err)
					}
					seqs = seqs[1:]
				}
			}
			for i := range inFlight + 1 {
				step(i)
			}
			kept := m.Kept()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				step(inFlight + 1 + i)
			}
			b.StopTimer()
			b.ReportMetric(float64(kept), "kept")
		})
	}
}
