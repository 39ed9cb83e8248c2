package prefix

import "github.com/kvpage/kvpage/blocks"

// withKeyMask ANDs mask into every table key (and default-hasher hash), forcing
// collisions: with mask 0 every block of the tree shares one key.
func withKeyMask(mask uint64) Option { return func(c *config) { c.keyMask = mask } }

// withUnseededKeys keys the table with Fast64's published constants, as before keys were
// seeded: what an attacker who crafts colliding blocks offline faces without a seed.
func withUnseededKeys() Option { return func(c *config) { c.unseeded = true } }

// hintOf is the block Match tries first after block id, or -1 for none.
func (x *Index) hintOf(id blocks.ID) blocks.ID {
	if c := x.nodes[nodeOf(id)].hint; c != 0 {
		return blockOf(c)
	}
	return -1
}
