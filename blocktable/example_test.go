package blocktable_test

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
)

// Example walks one request through admission, decode and finish, then shows a second
// request with the same system prompt hitting the cached blocks.
func Example() {
	const blockSize = 4
	pool, _ := blocks.New(17, blocks.WithNullBlock()) // 16 usable blocks
	clock := &evict.Counter{}
	index, _ := prefix.New(pool, blockSize, prefix.WithClock(clock))
	m, _ := blocktable.New(blocktable.Config{Pool: pool, Index: index, BlockSize: blockSize, Clock: clock})

	system := []int32{101, 102, 103, 104, 105, 106, 107, 108} // two full blocks
	prompt := append(append([]int32{}, system...), 1, 2, 3)
	res, err := m.Admit(1, &blocktable.Request{Prompt: prompt})
	if err != nil {
		panic(err)
	}
	fmt.Printf("admitted: hit %d tokens, %d new blocks\n", res.HitTokens, res.NewBlocks)

	// The prefill step: the slot mapping of the prompt's tokens and the block table row.
	slots := make([]int64, len(prompt))
	_, _ = m.FillSlots(1, 0, 0, slots)
	row := make([]int32, 4)
	_, _ = m.FillRow(1, row)
	fmt.Println("slots:", slots)
	fmt.Println("row:", row)

	// Decode: one token per step, each written at the slot Append made for it. The first
	// fills block 3, which is committed at once; the second needs a new block.
	for _, tok := range []int32{9, 8, 7} {
		step, err := m.Append(1, []int32{tok}, 0)
		if err != nil {
			panic(err) // ErrOutOfBlocks: Preempt, then retry
		}
		info, _ := m.Seq(1)
		slot, _ := m.Slot(1, info.Tokens-1)
		fmt.Printf("token %d: slot %d, new blocks %d, committed %d\n", tok, slot, step.NewBlocks, step.Committed)
	}
	if err := m.Finish(1); err != nil {
		panic(err)
	}
	st := m.Stats()
	fmt.Printf("finished: %d running, %d cached, %d free\n", st.Running, st.Cached, st.Free)

	// A second request with the same system prompt reuses its KV.
	res, _ = m.Admit(2, &blocktable.Request{Prompt: append(append([]int32{}, system...), 4, 5)})
	fmt.Printf("second request: hit %d tokens, new blocks %d\n", res.HitTokens, res.NewBlocks)
	_ = m.Abort(2)
	fmt.Println("invariants:", m.CheckInvariants())
	// Output:
	// admitted: hit 0 tokens, 3 new blocks
	// slots: [4 5 6 7 8 9 10 11 12 13 14]
	// row: [1 2 3 0]
	// token 9: slot 15, new blocks 0, committed 1
	// token 8: slot 16, new blocks 1, committed 0
	// token 7: slot 17, new blocks 0, committed 0
	// finished: 0 running, 3 cached, 13 free
	// second request: hit 8 tokens, new blocks 1
	// invariants: <nil>
}

// ExampleManager_Resume preempts a sequence in Swap mode, which keeps its KV in the
// index's host tier (there is no separate host pool: Swap needs prefix.WithTiers), and
// brings it back: the server executes the tiers' plans and confirms them.
func ExampleManager_Resume() {
	pool, _ := blocks.New(9, blocks.WithNullBlock()) // 8 usable blocks of 4 tokens
	index, _ := prefix.New(pool, 4, prefix.WithTiers(prefix.TierConfig{
		Tiers:      []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 16}},
		BlockBytes: 2 << 20, // one block's KV, as blocks/sizing computes it
	}))
	m, _ := blocktable.New(blocktable.Config{Index: index})
	_, _ = m.Admit(1, &blocktable.Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}})

	out, _ := m.Preempt(blocktable.PreemptRequest{Need: 3, Mode: blocktable.Swap}, nil)
	fmt.Printf("swapped: free at once %d, once copied %d, held in the host %d\n",
		out[0].Freed, out[0].Awaiting, m.Stats().HostInUse)
	complete := func() {
		for _, p := range m.TakePlans(nil) { // the server issues each plan's runs, then:
			fmt.Printf("plan: %d blocks, tier %d to %d, %d bytes\n", p.Blocks, p.From, p.To, p.Bytes)
			_, _ = m.CompleteTransfer(p.ID, true)
		}
	}
	complete()

	res, _ := m.Resume(1)
	fmt.Printf("resumed: load %d tokens, compute %d\n", res.LoadTokens, res.Tokens-res.HitTokens-res.LoadTokens)
	complete()
	_ = m.Finish(1)
	fmt.Println("invariants:", m.CheckInvariants())
	// Output:
	// swapped: free at once 1, once copied 2, held in the host 2
	// plan: 2 blocks, tier 0 to 1, 4194304 bytes
	// resumed: load 8 tokens, compute 2
	// plan: 2 blocks, tier 1 to 0, 4194304 bytes
	// invariants: <nil>
}
