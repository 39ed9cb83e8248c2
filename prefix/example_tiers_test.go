package prefix_test

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
)

// A host tier below a small device: a prompt's blocks are demoted when the device runs
// low, found again in host memory, and loaded back. The server executes each plan and
// confirms it; kvpage only keeps the books.
func ExampleWithTiers() {
	pool, _ := blocks.New(5, blocks.WithNullBlock()) // 4 usable blocks
	x, _ := prefix.New(pool, 4, prefix.WithTiers(prefix.TierConfig{
		Tiers:      []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 16, Write: prefix.WriteBack}},
		BlockBytes: 2 << 20, // from blocks/sizing: the model's bytes per block
		FreeTarget: 4,       // demote ahead of need while fewer than 4 blocks are free
	}))
	p := prefix.Prompt{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8}}
	ids, _ := pool.Allocate(nil, 2)
	var cur prefix.Cursor
	_, _ = x.Commit(&cur, &p, ids)
	_ = x.Release(ids)

	complete := func(plans []prefix.Plan) {
		for _, pl := range plans {
			fmt.Printf("plan %d: kind %d, tier %d to %d, %d blocks in %d run(s), %d bytes\n",
				pl.ID, pl.Kind, pl.From, pl.To, pl.Blocks, len(pl.Runs), pl.Bytes)
			_, _ = x.CompleteTransfer(pl.ID, true) // the server's copy succeeded
		}
	}
	complete(x.TakePlans(nil)) // below the watermark: the two blocks go to the host
	hit, cur := x.Peek(nil, &p, prefix.WholePrompt)
	h := x.PeekLower(&p, cur, prefix.WholePrompt, 0)
	fmt.Println("device hit", len(hit), "host hit", h.Blocks[1])

	dst, _ := pool.Allocate(nil, h.Lower)
	_, _ = x.PrepareLoad(&p, cur, prefix.WholePrompt, dst)
	complete(x.TakePlans(nil))
	_, _ = x.Commit(&cur, &p, dst) // loaded: cached on the device again
	fmt.Println("device cached", x.TierStatsOf(prefix.Device).Resident, "host", x.TierStatsOf(1).Resident)
	// Output:
	// plan 1: kind 0, tier 0 to 1, 2 blocks in 1 run(s), 4194304 bytes
	// device hit 0 host hit 2
	// plan 2: kind 1, tier 1 to 0, 2 blocks in 1 run(s), 4194304 bytes
	// device cached 2 host 2
}
