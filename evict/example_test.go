package evict_test

import (
	"errors"
	"fmt"

	"github.com/kvpage/kvpage/evict"
)

// A cache hands its evictable blocks to a policy and asks it for victims. Here a system
// prompt block is retained at priority 90 until logical time 20, while chat-turn blocks
// keep the default priority.
func Example() {
	var clock evict.Counter
	p, err := evict.NewPriority(16, &clock) // keys 0..15
	if err != nil {
		panic(err)
	}
	p.Add(evict.Entry{Key: 7, LastAccess: 1, Priority: 90, PriorityUntil: 20}) // system prompt
	p.Add(evict.Entry{Key: 3, LastAccess: 5})                                  // chat turn
	p.Add(evict.Entry{Key: 4, LastAccess: 6})                                  // chat turn
	p.Remove(4)                                                                // hit again: no longer evictable

	clock.Set(10)
	k, _ := p.Victim()
	fmt.Println("at 10 evict", k)

	p.Add(evict.Entry{Key: 3, LastAccess: 10})
	clock.Set(21) // retention ran out: block 7 is an old default-priority block now
	k, _ = p.Victim()
	fmt.Println("at 21 evict", k)

	_, err = evict.ByName("lrfu")
	fmt.Println(errors.Is(err, evict.ErrUnknownPolicy), err)
	_, err = evict.NewLRU(-1)
	fmt.Println(errors.Is(err, evict.ErrInvalidArgument), err)
	// Output:
	// at 10 evict 3
	// at 21 evict 7
	// true evict: unknown eviction policy "lrfu" (valid: lru, fifo, mru, lfu, priority, slru, s3fifo)
	// true evict: lru policy: capacity -1 out of range [0, 2147483647]
}

// Preemption policies pick running sequences to pause until enough blocks come back.
func ExamplePreemption() {
	running := []evict.Candidate{
		{ID: 1, Arrival: 1, Computed: 900, Output: 300, Freeable: 50},
		{ID: 2, Arrival: 2, Computed: 400, Output: 10, Freeable: 20},
		{ID: 3, Arrival: 3, Computed: 64, Output: 64, Freeable: 0}, // shares all its blocks
	}
	for _, name := range evict.PreemptionNames() {
		p, _ := evict.PreemptionByName(name)
		fmt.Println(name, p.Victims(nil, running, 30))
	}
	// Output:
	// fcfs [2 1 0]
	// priority [2 1 0]
	// progress [1 2 0]
	// cost [0]
}

// A researcher's policy: evict the block with the fewest hits first (the score is taken
// when the block becomes evictable), ties by smallest key.
func ExampleNewScored() {
	p, err := evict.NewScored(8, "hits-first", func(e evict.Entry) float64 { return float64(e.Hits) })
	if err != nil {
		panic(err)
	}
	p.Add(evict.Entry{Key: 1, Hits: 5})
	p.Add(evict.Entry{Key: 2, Hits: 1})
	p.Add(evict.Entry{Key: 3, Hits: 1})
	for p.Len() > 0 {
		k, _ := p.Victim()
		fmt.Print(k, " ")
	}
	fmt.Println()
	// Output: 2 3 1
}
