package evict

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownPolicy is matched (errors.Is) by every error for a policy name that ByName or
// PreemptionByName does not know; the error itself is an *UnknownPolicyError.
var ErrUnknownPolicy = errors.New("evict: unknown policy")

// UnknownPolicyError reports a policy name that is not built in, with the valid names.
type UnknownPolicyError struct {
	// Kind is "eviction" or "preemption".
	Kind string
	// Name is the name asked for.
	Name string
	// Valid lists the names that would have been accepted.
	Valid []string
}

// Error says which name was unknown and lists the valid ones.
func (e *UnknownPolicyError) Error() string {
	return fmt.Sprintf("evict: unknown %s policy %q (valid: %s)", e.Kind, e.Name, strings.Join(e.Valid, ", "))
}

// Unwrap returns ErrUnknownPolicy.
func (e *UnknownPolicyError) Unwrap() error { return ErrUnknownPolicy }
