package sim

import (
	"fmt"
	"strings"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
)

// Kind is an allocation scheme.
type Kind int

// The schemes. The three Orca schemes reserve one contiguous region per request, of a
// size fixed at admission, in one arena managed by first fit; Paged allocates blocks on
// demand through blocktable.Manager.
const (
	// OrcaMax reserves max-model-len tokens for every request.
	OrcaMax Kind = iota + 1
	// OrcaPow2 reserves the next power of two of the request's true length (its final
	// number of token states), at most max-model-len.
	OrcaPow2
	// OrcaOracle reserves exactly the true length.
	OrcaOracle
	// Paged allocates fixed-size blocks as tokens arrive.
	Paged
)

// String returns the scheme's name as the output spells it: orca-max, orca-pow2,
// orca-oracle, paged.
func (k Kind) String() string {
	switch k {
	case OrcaMax:
		return "orca-max"
	case OrcaPow2:
		return "orca-pow2"
	case OrcaOracle:
		return "orca-oracle"
	case Paged:
		return "paged"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ParseKind returns the scheme called name.
func ParseKind(name string) (Kind, error) {
	for k := OrcaMax; k <= Paged; k++ {
		if k.String() == strings.ToLower(strings.TrimSpace(name)) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown scheme %q (orca-max, orca-pow2, orca-oracle, paged)", ErrInvalidConfig, name)
}

// Scheme is one configuration to simulate.
type Scheme struct {
	Kind Kind
	// BlockSize is the tokens per block (Paged only; 0 for the contiguous schemes).
	BlockSize int
	// PrefixSharing turns on the prefix index (Paged only): requests share the cached
	// blocks of their common prefix, and a preempted request re-hits its own blocks.
	PrefixSharing bool
	// Eviction names the prefix cache's eviction policy (Paged with PrefixSharing); ""
	// means lru.
	Eviction string
	// Watermark is the fraction of blocks admission keeps free (Paged only; vLLM's
	// watermark). 0 disables it.
	Watermark float64
	// Preemption names the policy that picks which running requests to pause when one
	// cannot grow (Paged only; see evict.PreemptionNames); "" means fcfs, newest first.
	Preemption string
}

// Label is a short unique description for tables and charts: "orca-max", "paged/16",
// "paged/16+lru".
func (s Scheme) Label() string {
	if s.Kind != Paged {
		return s.Kind.String()
	}
	l := fmt.Sprintf("paged/%d", s.BlockSize)
	if s.PrefixSharing {
		l += "+" + s.EvictionName()
	}
	if s.Preemption != "" && s.Preemption != "fcfs" {
		l += " preempt=" + s.Preemption
	}
	if s.Watermark > 0 {
		l += fmt.Sprintf(" wm=%g", s.Watermark)
	}
	return l
}

// EvictionName is the eviction policy in effect: "" for a contiguous scheme, "none" for
// paging without prefix sharing (nothing is cached, so nothing is evicted), else the
// policy's name.
func (s Scheme) EvictionName() string {
	switch {
	case s.Kind != Paged:
		return ""
	case !s.PrefixSharing:
		return "none"
	case s.Eviction == "":
		return "lru"
	}
	return s.Eviction
}

func (s Scheme) validate(c *Config) error {
	if s.Kind < OrcaMax || s.Kind > Paged {
		return fmt.Errorf("%w: unknown scheme kind %d", ErrInvalidConfig, int(s.Kind))
	}
	if s.Kind != Paged {
		if s.BlockSize != 0 || s.PrefixSharing || s.Eviction != "" || s.Watermark != 0 || s.Preemption != "" {
			return fmt.Errorf("%w: %v takes no block size, prefix sharing, eviction, preemption or watermark", ErrInvalidConfig, s.Kind)
		}
		return nil
	}
	if s.BlockSize < 1 || s.BlockSize > c.Capacity {
		return fmt.Errorf("%w: block size %d outside [1, KV budget %d]", ErrInvalidConfig, s.BlockSize, c.Capacity)
	}
	if !(s.Watermark >= 0 && s.Watermark < 1) {
		return fmt.Errorf("%w: watermark %v outside [0, 1)", ErrInvalidConfig, s.Watermark)
	}
	if s.PrefixSharing {
		if _, err := NewEvictionPolicy(s.EvictionName(), &evict.Counter{}); err != nil {
			return err
		}
	}
	if _, err := NewPreemptionPolicy(s.Preemption); err != nil {
		return err
	}
	// The pool's null block takes one block of the budget (vLLM reserves block 0 too).
	usable := c.Capacity/s.BlockSize - 1
	if need := ceilDiv(c.MaxModelLen, s.BlockSize); usable < need {
		return fmt.Errorf("%w: at block size %d the KV budget of %d tokens holds %d usable blocks, fewer than the %d one request of max-model-len %d needs",
			ErrInvalidConfig, s.BlockSize, c.Capacity, max(usable, 0), need, c.MaxModelLen)
	}
	return nil
}

// NewEvictionPolicy returns a fresh eviction policy of package evict called name (see
// evict.Names), on the given logical clock.
func NewEvictionPolicy(name string, clock evict.Clock) (evict.Policy[blocks.ID], error) {
	p, err := evict.New[blocks.ID](name, clock)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return p, nil
}

// NewPreemptionPolicy returns the preemption policy of package evict called name (see
// evict.PreemptionNames); "" means fcfs, vLLM's newest-first default.
func NewPreemptionPolicy(name string) (evict.Preemption, error) {
	if name == "" {
		name = "fcfs"
	}
	p, err := evict.PreemptionByName(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return p, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
