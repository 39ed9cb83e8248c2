package cluster

// WithApplyChunk sets how many blocks Apply handles per hold of the lock, so that the
// benchmark can compare with holding it for a whole batch.
func WithApplyChunk(n int) Option { return func(c *ClusterIndex) { c.chunk = max(n, 1) } }

// WithHoldObserver makes Apply call f(true) after it takes the lock and f(false) before it
// releases it.
func WithHoldObserver(f func(acquired bool)) Option { return func(c *ClusterIndex) { c.onHold = f } }
