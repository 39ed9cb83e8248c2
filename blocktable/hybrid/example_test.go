package hybrid_test

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable/hybrid"
)

// A gpt-oss-like model: full attention plus a 128-token sliding window in one pool. The
// second request shares the first one's 160-token prefix and hits it in both groups.
func Example() {
	m, err := hybrid.New(hybrid.Config{
		Groups: []hybrid.Spec{
			hybrid.FullAttention{Block: 16},
			hybrid.SlidingWindow{Block: 16, Window: 128},
		},
		NumBlocks: 64,
	})
	if err != nil {
		panic(err)
	}
	prompt := make([]int32, 200)
	for i := range prompt {
		prompt[i] = int32(i)
	}
	req := hybrid.Request{Prompt: prompt, MaxTokens: 256}
	hit, _ := m.Admit(1, &req)
	fmt.Println("first hit", hit)
	_ = m.Append(1, []int32{7})
	window, _ := m.Table(1, 1)
	fmt.Println("window blocks released:", countNull(window))
	_ = m.Finish(1)

	hit, _ = m.Admit(2, &req)
	fmt.Println("second hit", hit)
	// Output:
	// first hit 0
	// window blocks released: 4
	// second hit 192
}

func countNull(t []blocks.ID) int {
	n := 0
	for _, b := range t {
		if b == 0 {
			n++
		}
	}
	return n
}

// Parallel sampling over a hybrid model: Fork shares both groups' blocks, the first write
// into the shared, partly filled last block copies it per group (the CopyOps a kernel runs
// before the step). Sequence 1 wrote first and got the copies, so the originals are 2's
// alone: preempting 2 would free those two blocks and nothing the two still share.
func ExampleManager_Fork() {
	m, err := hybrid.New(hybrid.Config{
		Groups:    []hybrid.Spec{hybrid.FullAttention{Block: 16}, hybrid.SlidingWindow{Block: 16, Window: 32}},
		NumBlocks: 64,
	})
	if err != nil {
		panic(err)
	}
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(i)
	}
	if _, err := m.Admit(1, &hybrid.Request{Prompt: prompt, MaxTokens: 64}); err != nil {
		panic(err)
	}
	_ = m.Fork(1, 2)
	_ = m.Append(1, []int32{100})
	_ = m.Append(2, []int32{200})
	for _, c := range m.TakeCopies(nil) {
		fmt.Printf("group %d: copy block %d to %d\n", c.Group, c.Src, c.Dst)
	}
	freeable, _ := m.Freeable(2)
	fmt.Println("preempting 2 frees", freeable)
	// Output:
	// group 0: copy block 3 to 7
	// group 1: copy block 6 to 8
	// preempting 2 frees 2
}
