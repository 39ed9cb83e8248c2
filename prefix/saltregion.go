package prefix

import "strings"

// Salt regions: a prompt whose first tokens are public (a system prompt every tenant
// shares) and whose remainder is private to one tenant (vLLM PR #52655's idea). The
// tenants use one namespace without a salt; each tenant's prompt carries SaltRegion's
// marker, an extra key on the block holding token Public (the first private block) that
// takes part in equality and in the hashes as a multimodal input's does. Blocks before it
// are shared by every tenant; from it on, the chain is the tenant's own, so two tenants'
// identical private tokens never share a block. Blocks are the unit: when Public is not a
// multiple of the block size, the block it falls in is private.

// saltKeyPrefix starts every salt-region marker; no multimodal hash starts with a NUL.
const saltKeyPrefix = "\x00kvpage-salt:"

// SaltKey is the marker of salt for SaltRegion. It allocates: compute it once per tenant.
func SaltKey(salt string) string { return saltKeyPrefix + salt }

// isSaltKey reports whether an extra key marks the first block of a salt region.
func isSaltKey(k string) bool { return strings.HasPrefix(k, saltKeyPrefix) }

// SaltRegion appends to mm (a prompt's multimodal inputs, sorted by Offset) the marker of
// a private region starting at token public, keeping the order, and returns the slice to
// use as Prompt.MM (or blocktable.Request.MM). key is SaltKey(salt). It allocates nothing
// when mm has room for one more.
func SaltRegion(mm []MMInput, public int, key string) []MMInput {
	in := MMInput{Hash: key, Offset: max(public, 0), Length: 1}
	i := len(mm)
	for i > 0 && mm[i-1].Offset > in.Offset {
		i--
	}
	mm = append(mm, MMInput{})
	copy(mm[i+1:], mm[i:])
	mm[i] = in
	return mm
}
