package evict

// Clock is a logical clock: a counter that the owner of a cache or scheduler advances,
// never wall time, so that every decision that depends on time is reproducible.
//
// One Clock may be shared by the prefix index and the manager (and by a test's fake clock)
// so that they agree on what "recent" means.
type Clock interface {
	// Now returns the current logical time without advancing it.
	Now() uint64
	// Tick advances the clock by one and returns the new time.
	Tick() uint64
}

// Counter is the default Clock: a plain counter that starts at zero.
// Its zero value is ready to use.
type Counter struct{ t uint64 }

// Now returns the current logical time.
func (c *Counter) Now() uint64 { return c.t }

// Tick advances the clock by one and returns the new time.
func (c *Counter) Tick() uint64 { c.t++; return c.t }

// Set moves the clock to t (tests use it to jump forward, for example past a retention time).
func (c *Counter) Set(t uint64) { c.t = t }
