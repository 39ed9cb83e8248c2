package kvtest_test

import (
	"fmt"

	"github.com/kvpage/kvpage/blocktable/hybrid"
	"github.com/kvpage/kvpage/blocktable/kvtest"
)

// A hybrid test that forgets to finish a fork fails when it ends, with each block still
// held and the sequence and KV-cache group holding it.
func ExampleNewHybrid() {
	t := &printTB{} // a *testing.T in a real test
	env := kvtest.NewHybrid(t, kvtest.HybridConfig{
		Groups: []hybrid.Spec{hybrid.FullAttention{Block: 4}, hybrid.SlidingWindow{Block: 4, Window: 4}},
		Blocks: 9,
	})
	m := env.Manager
	if _, err := m.Admit(env.Seq("r1"), &hybrid.Request{Prompt: kvtest.MustTokens("0..5"), MaxTokens: 8}); err != nil {
		fmt.Println(err)
	}
	if err := m.Fork(env.Seq("r1"), env.Seq("r2")); err != nil {
		fmt.Println(err)
	}
	if err := m.Append(env.Seq("r2"), []int32{6}); err != nil { // copies the shared last blocks
		fmt.Println(err)
	}
	fmt.Printf("copies: %+v\n", m.TakeCopies(nil))
	if err := m.Finish(env.Seq("r1")); err != nil {
		fmt.Println(err)
	}
	// r2 is never finished.
	fmt.Printf("%+v\n", env.Blocks())
	t.end()
	// Output:
	// copies: [{Group:0 Src:2 Dst:5} {Group:1 Src:4 Dst:6}]
	// {Capacity:8 Free:4 Evictable:0 Held:4 HeldPerGroup:[2 2] CachedPerGroup:[1 1]}
	// FAIL: kvtest: blocks leaked: 4 blocks still held at the end of the test:
	//   sequences never finished or preempted: r2
	//   block 1: refcount 1, held by r2 (group 0) (and cached)
	//   block 3: refcount 1, held by r2 (group 1) (and cached)
	//   block 5: refcount 1, held by r2 (group 0)
	//   block 6: refcount 1, held by r2 (group 1)
}
