package hybrid_test

import (
	"fmt"

	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/prefix"
)

// A hybrid model with a host tier: the first request's blocks are written through to the
// host; a second prompt evicts them from the device; the first prompt, admitted again,
// loads them back (both groups: full attention every block, the window its last one)
// instead of computing them.
func Example_tiers() {
	m, err := hybrid.New(hybrid.Config{
		Groups:    []hybrid.Spec{hybrid.FullAttention{Block: 16}, hybrid.SlidingWindow{Block: 16, Window: 32}},
		NumBlocks: 33,
		Tiers: &prefix.TierConfig{BlockBytes: 1 << 20, Tiers: []prefix.TierSpec{
			{Medium: prefix.MediumCPU, Capacity: 64, Write: prefix.WriteThrough},
		}},
	})
	if err != nil {
		panic(err)
	}
	serve := func() { // the server's side: execute every plan, confirm it
		for _, p := range m.TakePlans(nil) {
			if p.Kind == prefix.Load {
				fmt.Printf("load %d blocks, %d bytes, from tier %d\n", p.Blocks, p.Bytes, p.From)
			}
			if d, _ := m.CompleteTransfer(p.ID, true); d.Loaded {
				fmt.Println("sequence", d.Seq, "loaded")
			}
		}
	}
	a, b := tokens(129, 0), tokens(256, 5000)
	_, _ = m.Admit(1, &hybrid.Request{Prompt: a, MaxTokens: 130})
	serve()
	_ = m.Finish(1)
	_, _ = m.Admit(2, &hybrid.Request{Prompt: b, MaxTokens: 256}) // evicts all of a's blocks
	serve()
	_ = m.Finish(2)
	r, _ := m.AdmitTiered(3, &hybrid.Request{Prompt: a, MaxTokens: 130})
	fmt.Println("device hit", r.Hit, "loading", r.LoadTokens, "tokens")
	serve()
	fmt.Println("cached again:", m.Match(a))
	// Output:
	// device hit 0 loading 128 tokens
	// load 10 blocks, 10485760 bytes, from tier 1
	// sequence 3 loaded
	// cached again: 128
}

func tokens(n int, base int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = base + int32(i)
	}
	return out
}
