package kvtest

import "github.com/kvpage/kvpage/evict"

// Clock is the deterministic fake logical clock that New shares between the prefix index
// and the Manager (and a clock-reading eviction policy), so that "recent" means the same
// thing everywhere and a test can move time on by hand. It is an evict.Clock; its zero
// value starts at 0.
type Clock struct{ evict.Counter }

// Advance moves the clock d ticks forward and returns the new time, as if d operations
// had happened elsewhere (to age a retention priority, or to separate two bursts).
func (c *Clock) Advance(d uint64) uint64 {
	c.Set(c.Now() + d)
	return c.Now()
}
