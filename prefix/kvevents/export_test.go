package kvevents

// WithSendHook makes the sender goroutine call hook before each batch, so that a test can
// hold it and fill the queue deterministically.
func WithSendHook(hook func()) Option { return func(c *config) { c.sendHook = hook } }
