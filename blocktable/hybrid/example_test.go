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
