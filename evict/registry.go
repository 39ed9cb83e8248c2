package evict

import (
	"cmp"
	"fmt"
	"slices"
)

// evictionNames lists the built-in eviction policies that New can build from a name, in the
// order in which tools should present them (the default first).
var evictionNames = []string{"lru", "fifo", "mru", "lfu", "priority", "slru", "s3fifo"}

// Names returns the names New accepts, the default ("lru") first. The slice is the caller's.
func Names() []string { return slices.Clone(evictionNames) }

// New builds the built-in eviction policy called name, with its default parameters, for
// keys of type K (a command-line tool builds New[blocks.ID](name, clock)). clock is the
// cache's logical clock; only "priority" reads it, and fails with ErrNoClock when it is nil.
// An unknown name fails with an *UnknownPolicyError listing the valid names. Scored is not
// here: it needs a function, not a name.
func New[K cmp.Ordered](name string, clock Clock) (Policy[K], error) {
	switch name {
	case "lru":
		return NewLRU[K](), nil
	case "fifo":
		return NewFIFO[K](), nil
	case "mru":
		return NewMRU[K](), nil
	case "lfu":
		return NewLFU[K](DefaultHalfLife), nil
	case "priority":
		if clock == nil {
			return nil, fmt.Errorf("%w: %q reads the current time", ErrNoClock, name)
		}
		return NewPriority[K](clock), nil
	case "slru":
		return NewSLRU[K](DefaultProtectedPercent), nil
	case "s3fifo":
		return NewS3FIFO[K](DefaultSmallPercent), nil
	}
	return nil, &UnknownPolicyError{Kind: "eviction", Name: name, Valid: Names()}
}
