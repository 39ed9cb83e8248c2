package prefix

// withKeyMask ANDs mask into every table key (and default-hasher hash), forcing
// collisions: with mask 0 every block of the tree shares one key.
func withKeyMask(mask uint64) Option { return func(c *config) { c.keyMask = mask } }
