package cluster

// WithApplyChunk sets how many blocks Apply handles per hold of the lock, so that the
// benchmark can compare with holding it for a whole batch.
func WithApplyChunk(n int) Option { return func(c *ClusterIndex) { c.chunk = max(n, 1) } }

// WithHoldObserver makes Apply call f(true) after it takes the lock and f(false) before it
// releases it.
func WithHoldObserver(f func(acquired bool)) Option { return func(c *ClusterIndex) { c.onHold = f } }

// WithRunHook makes every lookup call f between two runs of hashing, with the index's lock
// released, so that a test can apply a batch exactly there.
func WithRunHook(f func()) Option { return func(c *ClusterIndex) { c.betweenRuns = f } }

// Restarts returns how many times lookups started their walk over since the index was made.
func Restarts(c *ClusterIndex) uint64 {
	c.lookMu.Lock()
	defer c.lookMu.Unlock()
	return c.restarts
}
