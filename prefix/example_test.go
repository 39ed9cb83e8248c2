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
