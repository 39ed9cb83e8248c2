package prefix_test

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/prefix"
)

// Two requests share a system prompt: the second one reuses the first one's blocks.
func Example() {
	const blockSize = 4
	pool, _ := blocks.New(16, blocks.WithNullBlock())
	idx, _ := prefix.New(pool, blockSize)

	system := []int32{1, 2, 3, 4, 5, 6, 7, 8} // two blocks
	serve := func(user ...int32) {
		p := &prefix.Prompt{Tokens: append(append([]int32{}, system...), user...)}
		ids, cur := idx.Peek(nil, p, prefix.LeaveOne) // the cached prefix; takes nothing yet
		idx.RecordLookup(p, cur)                      // admitted: count it once in Stats
		hit := len(ids)
		_ = idx.Acquire(ids) // the request's own references on its hit
		ids, _ = pool.Allocate(ids, (len(p.Tokens)+blockSize-1)/blockSize-hit)
		// ... the model computes the rest of the prompt into the new blocks ...
		res, _ := idx.Commit(&cur, p, ids[hit:len(p.Tokens)/blockSize]) // share the full ones
		_ = idx.Release(ids)                                            // request done
		fmt.Printf("hit %d blocks, stored %d, cached %d\n", hit, res.Stored, idx.Stats().Cached)
	}
	serve(10, 11, 12, 13, 14)
	serve(20, 21, 22, 23, 24)
	fmt.Printf("hit rate %.2f\n", idx.Stats().HitRate())
	// Output:
	// hit 0 blocks, stored 3, cached 3
	// hit 2 blocks, stored 1, cached 4
	// hit rate 0.31
}

// A hybrid model's tree: full attention (group 0) and a sliding window (group 1) cache
// their blocks under the same logical prefixes. The window's first block is evicted from
// the middle of the chain; its node stays as a tombstone, and the prefix after it is
// still found.
func ExampleGroupTree() {
	const unit = 4
	tree, _ := prefix.NewGroupTree(16, unit, 2)
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	first := tree.Ensure(prefix.RootNode, prompt[:unit])
	second := tree.Ensure(first, prompt[unit:])
	_ = tree.Cache(1, first, 0) // full attention: blocks 1 and 2
	_ = tree.Cache(2, second, 0)
	_ = tree.Cache(3, first, 1) // the window: blocks 3 and 4
	_ = tree.Cache(4, second, 1)

	_ = tree.Uncache(3) // the window's first block left the window and was reused
	n := tree.Next(tree.Next(prefix.RootNode, prompt[:unit]), prompt[unit:])
	fmt.Println("second unit found:", n == second)
	fmt.Println("window blocks:", tree.First(first, 1), tree.First(second, 1))
	fmt.Println("full attention blocks:", tree.First(first, 0), tree.First(second, 0))
	fmt.Println("cached per group:", tree.Stats().Cached)
	// Output:
	// second unit found: true
	// window blocks: 0 4
	// full attention blocks: 1 2
	// cached per group: [2 1]
}

// A step's forward pass failed after its blocks were committed (or a KV connector failed
// to load one): EvictBlocks takes them out of the cache, with every block below them, so
// no later request hits KV that was never computed. Blocks a request holds stay its own.
func ExampleIndex_EvictBlocks() {
	const blockSize = 4
	pool, _ := blocks.New(16, blocks.WithNullBlock())
	idx, _ := prefix.New(pool, blockSize)

	p := &prefix.Prompt{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}} // three blocks
	ids, _ := pool.Allocate(nil, 3)
	var cur prefix.Cursor
	_, _ = idx.Commit(&cur, p, ids) // cached before the pass, so that the step can share them
	// ... the pass fails for the second block and everything after it ...
	dropped, _ := idx.EvictBlocks(nil, ids[1:2])
	fmt.Println("dropped", dropped, "still cached", idx.Stats().Cached)
	hit, _ := idx.Peek(nil, p, prefix.WholePrompt)
	fmt.Println("a later lookup hits", hit)
	fmt.Println("held by the request:", pool.RefCount(ids[1]))
	// Output:
	// dropped [3 2] still cached 1
	// a later lookup hits [1]
	// held by the request: 1
}
