package evict

import (
	"testing"

	"github.com/kvpage/kvpage/internal/invariant"
)

// churn is the steady state of a cache: the victim is evicted and its block comes back
// with new content, and some other candidate is hit (removed) and released (added) again.
type churn struct {
	p     Policy
	clock *Counter
	n     int32
	x     uint64
}

func newChurn(pc policyCase, n int) *churn {
	c := &churn{clock: &Counter{}, n: int32(n), x: 1}
	c.p, _ = pc.build(n, c.clock)
	for k := range c.n {
		c.p.Add(c.entry(k))
	}
	for range 4 * n { // reach the working size of every slice, map and free list
		c.step()
	}
	return c
}

func (c *churn) entry(k int32) Entry {
	c.x = c.x*6364136223846793005 + 1442695040888963407
	r := c.x >> 33
	now := c.clock.Tick()
	return Entry{Key: k, LastAccess: now - r%64, Hits: uint32(r % 5),
		Priority: priorities[r%uint64(len(priorities))], PriorityUntil: now + r%128}
}

func (c *churn) step() {
	k, ok := c.p.Victim()
	if !ok {
		panic("churn: empty policy")
	}
	c.p.Add(c.entry(k))
	other := int32(c.x>>40) % c.n
	if c.p.Remove(other) {
		c.p.Add(c.entry(other))
	}
}

// TestPoliciesDoNotAllocate proves the contract's "0 allocations in steady state" for
// every built-in policy, with thousands of candidates.
func TestPoliciesDoNotAllocate(t *testing.T) {
	if invariant.Enabled {
		t.Skip("invariant checks allocate")
	}
	for _, pc := range policyCases() {
		t.Run(pc.name, func(t *testing.T) {
			c := newChurn(pc, 4096)
			if a := testing.AllocsPerRun(20000, c.step); a != 0 {
				t.Fatalf("%s: %v allocations per Victim+Add+Remove+Add", pc.name, a)
			}
		})
	}
}

// TestPreemptionDoesNotAllocate proves that Victims allocates nothing when dst has room.
func TestPreemptionDoesNotAllocate(t *testing.T) {
	if invariant.Enabled {
		t.Skip("invariant checks allocate")
	}
	running := make([]Candidate, 256)
	for i := range running {
		running[i] = Candidate{ID: uint64(i * 7 % 256), Priority: i % 3, Arrival: uint64(i), Computed: 100 + i,
			Output: i % 17, Held: 10, Freeable: i % 4}
	}
	dst := make([]int, 0, len(running))
	for _, name := range PreemptionNames() {
		p, err := PreemptionByName(name)
		if err != nil {
			t.Fatal(err)
		}
		a := testing.AllocsPerRun(100, func() { dst = p.Victims(dst[:0], running, 40) })
		if a != 0 {
			t.Fatalf("%s: %v allocations per Victims", name, a)
		}
		if len(dst) == 0 {
			t.Fatalf("%s: no victims", name)
		}
	}
}
