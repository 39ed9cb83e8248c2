package blocks_test

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kvpage/kvpage/blocks"
)

// A request allocates blocks, a second request shares some of them, and released blocks are
// reused in the order they came back.
func Example() {
	pool, err := blocks.New(8, blocks.WithNullBlock()) // block 0 reserved, 7 usable
	if err != nil {
		panic(err)
	}
	ids := make([]blocks.ID, 0, 8) // reused: Allocate appends without allocating
	a, _ := pool.Allocate(ids[:0], 3)
	fmt.Println("A holds", a)

	_ = pool.Retain(a[0], a[1]) // B shares A's first two blocks
	_ = pool.Release(a...)      // A finishes; only its third block has no holder left
	fmt.Println("free after A:", pool.NumFree(), "refcount of", a[0], "is", pool.RefCount(a[0]))

	c, _ := pool.Allocate(nil, 5) // never-used blocks first, then released ones in order
	fmt.Println("C holds", c)

	_, err = pool.Allocate(nil, 1)
	var oob *blocks.OutOfBlocksError
	if errors.As(err, &oob) {
		fmt.Printf("D wants %d, %d available: %v\n", oob.Requested, oob.Available, errors.Is(err, blocks.ErrOutOfBlocks))
	}
	err = pool.Release(c[4], c[4])
	fmt.Println(err, "| double free:", errors.Is(err, blocks.ErrDoubleFree), "| unchanged:", pool.RefCount(c[4]))
	// Output:
	// A holds [1 2 3]
	// free after A: 5 refcount of 1 is 1
	// C holds [4 5 6 7 3]
	// D wants 1, 0 available: true
	// blocks: release block 3: double free | double free: true | unchanged: 1
}

// lruCache is the smallest useful Reclaimer: it keeps one reference on each cached block and
// evicts, oldest first, the blocks nobody else holds. The prefix index plays this part in
// kvpage.
type lruCache struct {
	pool   *blocks.Pool
	blocks []blocks.ID
}

func (c *lruCache) Reclaimable() int {
	n := 0
	for _, id := range c.blocks {
		if c.pool.RefCount(id) == 1 {
			n++
		}
	}
	return n
}

func (c *lruCache) Reclaim(n int) int {
	freed, kept := 0, c.blocks[:0]
	for _, id := range c.blocks {
		if freed < n && c.pool.RefCount(id) == 1 {
			_ = c.pool.Release(id)
			freed++
			continue
		}
		kept = append(kept, id)
	}
	c.blocks = kept
	return freed
}

// Cached blocks keep Usage up after the requests finish, while ActiveUsage falls to what
// running requests need; an allocation that outgrows the free list evicts from the cache.
func ExampleStats() {
	pool, _ := blocks.New(4)
	cache := &lruCache{pool: pool}
	pool.SetReclaimer(cache)

	req, _ := pool.Allocate(nil, 3)
	_ = pool.Retain(req...) // the cache keeps all three for later prefix hits
	cache.blocks = append(cache.blocks, req...)
	_ = pool.Release(req[1:]...) // the request still runs on its first block
	s := pool.Stats()
	fmt.Printf("usage %.2f, active usage %.2f, reclaimable %d\n", s.Usage(), s.ActiveUsage(), s.Reclaimable)

	more, _ := pool.Allocate(nil, 2) // 1 free block + 1 evicted from the cache
	s = pool.Stats()
	fmt.Println("got", more, "reclaimed", s.Reclaimed, "still cached", cache.blocks)
	// Output:
	// usage 0.75, active usage 0.25, reclaimable 2
	// got [3 1] reclaimed 1 still cached [0 2]
}

// vLLM's free queue: released blocks wait in the order they were freed, a prefix hit
// takes a waiting block back from the middle, and allocation takes the front (whose
// cached contents the caller's index evicts).
func ExampleFreeQueue() {
	q, _ := blocks.NewFreeQueue(6) // block 0 is the null block
	a, _ := q.Pop()
	b, _ := q.Pop()
	_ = q.Release(b) // b's request finishes first
	_ = q.Release(a)
	fmt.Println("queue:", slices.Collect(q.All()))
	_ = q.Retain(b) // a hit on b: out of the queue, wherever it was
	fmt.Println("after the hit:", slices.Collect(q.All()), "refcount", q.RefCount(b))
	next, _ := q.Pop()
	fmt.Println("next allocation:", next)
	// Output:
	// queue: [3 4 5 2 1]
	// after the hit: [3 4 5 1] refcount 1
	// next allocation: 3
}
