package evict

import "slices"

// evictionNames lists the built-in eviction policies that ByName knows, in the order in
// which tools should present them (the default first).
var evictionNames = []string{"lru", "fifo", "mru", "lfu", "priority", "slru", "s3fifo"}

// Names returns the names ByName accepts, the default ("lru") first. The slice is the caller's.
func Names() []string { return slices.Clone(evictionNames) }

// ByName returns the Factory of the built-in eviction policy called name, with its default
// parameters. An unknown name fails with an *UnknownPolicyError listing the valid names.
// "priority" reads the cache's clock: its Factory fails if given a nil one. Scored is not
// here: it needs a function, not a name.
func ByName(name string) (Factory, error) {
	switch name {
	case "lru":
		return func(n int, _ Clock) (Policy, error) { return NewLRU(n) }, nil
	case "fifo":
		return func(n int, _ Clock) (Policy, error) { return NewFIFO(n) }, nil
	case "mru":
		return func(n int, _ Clock) (Policy, error) { return NewMRU(n) }, nil
	case "lfu":
		return func(n int, _ Clock) (Policy, error) { return NewLFU(n, DefaultHalfLife) }, nil
	case "priority":
		return NewPriority, nil
	case "slru":
		return func(n int, _ Clock) (Policy, error) { return NewSLRU(n, DefaultProtectedPercent) }, nil
	case "s3fifo":
		return func(n int, _ Clock) (Policy, error) { return NewS3FIFO(n, DefaultSmallPercent) }, nil
	}
	return nil, &UnknownPolicyError{Kind: "eviction", Name: name, Valid: Names()}
}
