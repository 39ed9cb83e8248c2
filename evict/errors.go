package evict

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/kvpage/kvpage/internal/argerr"
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

// ErrInvalidArgument is matched (errors.Is) by every error a policy constructor returns
// for an argument out of range; the error itself is an *ArgumentError. A constructor that
// fails builds nothing. It matches (errors.Is) blocks.ErrInvalidArgument and every other
// package's invalid-argument sentinel, and they match it.
var ErrInvalidArgument = argerr.New("evict: invalid argument")

// MaxCapacity is the largest capacity a policy accepts: keys are int32.
const MaxCapacity = math.MaxInt32

// ArgumentError reports a policy constructor's argument out of range.
type ArgumentError struct {
	// Policy is the policy's name ("lru", "slru", ...).
	Policy string
	// What names the argument ("capacity", "percent", "clock", "score").
	What string
	// N is the value passed (0 for a nil clock or function); Min and Max the range
	// accepted (both 0 for an argument that must not be nil).
	N, Min, Max int64
}

// Error names the policy, the argument and the range accepted.
func (e *ArgumentError) Error() string {
	if e.Min == 0 && e.Max == 0 {
		return fmt.Sprintf("evict: %s policy: %s must not be nil", e.Policy, e.What)
	}
	return fmt.Sprintf("evict: %s policy: %s %d out of range [%d, %d]", e.Policy, e.What, e.N, e.Min, e.Max)
}

// Unwrap returns ErrInvalidArgument.
func (e *ArgumentError) Unwrap() error { return ErrInvalidArgument }

// checkCapacity refuses a capacity no policy can hold.
func checkCapacity(policy string, capacity int) error {
	if capacity < 0 || capacity > MaxCapacity {
		return &ArgumentError{Policy: policy, What: "capacity", N: int64(capacity), Max: MaxCapacity}
	}
	return nil
}

// checkShare checks the capacity and the segment share of a two-queue policy (SLRU,
// S3FIFO), refusing a share outside 0 to 100, and returns the share, def for 0.
func checkShare(policy string, capacity, percent, def int) (int, error) {
	if err := checkCapacity(policy, capacity); err != nil {
		return 0, err
	}
	if percent < 0 || percent > 100 {
		return 0, &ArgumentError{Policy: policy, What: "percent", N: int64(percent), Max: 100}
	}
	if percent == 0 {
		return def, nil
	}
	return percent, nil
}
