package sim

import (
	"fmt"
	"strings"

	"github.com/kvpage/kvpage/blocks/sizing"
	"github.com/kvpage/kvpage/evict"
)

// The built-in schemes' names. The three Orca schemes reserve one contiguous region per
// request, of a size fixed at admission, in one arena managed by first fit (contiguous.go);
// Paged allocates blocks on demand through blocktable.Manager (paged.go).
const (
	// OrcaMax reserves max-model-len tokens for every request.
	OrcaMax = "orca-max"
	// OrcaPow2 reserves the next power of two of the request's true length (its final
	// number of token states), at most max-model-len.
	OrcaPow2 = "orca-pow2"
	// OrcaOracle reserves exactly the true length.
	OrcaOracle = "orca-oracle"
	// Paged allocates fixed-size blocks as tokens arrive.
	Paged = "paged"
)

// schemeDef is one registered scheme: the allocator it builds for a run, and whether it
// allocates in blocks (and so takes Scheme's block options). A new scheme is a file that
// implements allocator and calls registerScheme from init; nothing else changes.
type schemeDef struct {
	name string
	// blocks: the scheme allocates fixed-size blocks and takes BlockSize, PrefixSharing,
	// Eviction, Watermark and Preemption; a scheme without blocks takes none of them.
	blocks bool
	// validate checks the scheme's options against the configuration (nil: none to check).
	validate func(s *Scheme, c *Config) error
	// build returns a fresh allocator for one run over seqs (the scheduler's requests,
	// indexed by request ID).
	build func(c *Config, s *Scheme, seqs []seq) (allocator, error)
}

// schemeRegistry holds the schemes in registration order.
var schemeRegistry []schemeDef

func registerScheme(d schemeDef) {
	if _, ok := lookupScheme(d.name); ok {
		panic("sim: scheme registered twice: " + d.name)
	}
	schemeRegistry = append(schemeRegistry, d)
}

func lookupScheme(name string) (*schemeDef, bool) {
	for i := range schemeRegistry {
		if schemeRegistry[i].name == name {
			return &schemeRegistry[i], true
		}
	}
	return nil, false
}

// SchemeNames returns the registered schemes' names: orca-max, orca-pow2, orca-oracle,
// paged, hybrid.
func SchemeNames() []string {
	names := make([]string, len(schemeRegistry))
	for i, d := range schemeRegistry {
		names[i] = d.name
	}
	return names
}

// ParseSchemeName returns the registered scheme's name that name spells (case and
// surrounding space ignored).
func ParseSchemeName(name string) (string, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if _, ok := lookupScheme(n); ok {
		return n, nil
	}
	return "", fmt.Errorf("%w: unknown scheme %q (%s)", ErrInvalidConfig, name, strings.Join(SchemeNames(), ", "))
}

// Scheme is one configuration to simulate.
type Scheme struct {
	// Name is a registered scheme (SchemeNames): orca-max, orca-pow2, orca-oracle, paged.
	Name string
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
	// Model, Layout and StateBlock configure the Hybrid scheme (see Hybrid): a hybrid
	// preset of blocks/sizing, a layout (HybridLayouts), and the tokens between cached
	// states under the per-class and carved layouts (0: the uniform layout's block).
	Model, Layout string
	StateBlock    int
	// MambaMode is the hybrid scheme's Mamba cache mode (hybrid.MambaAll, the default
	// when "", or hybrid.MambaAlign).
	MambaMode string
	// KVCacheDType is the KV cache data type (vLLM's --kv-cache-dtype; 0 means bf16). The
	// hybrid scheme's attention pages and its token-equivalent (HybridTokenBytes) are
	// sized in it, as a sizing plan in that data type sizes the paged rows' tokens; its
	// Mamba / linear-attention state keeps the model's own data type, as vLLM's
	// mamba_cache_dtype auto does whatever the KV cache's. The other schemes count KV in
	// tokens (Config.Capacity), sized by the caller in some data type: for them it only
	// names that data type in Label, so that every row of a run says it alike.
	KVCacheDType sizing.DType
	// ModelDType is the data type the model runs in (vLLM's --dtype; 0 means auto,
	// sizing.ModelSpec.ServingDType): fp16, bf16 or fp32. The hybrid model's Mamba /
	// linear-attention state is sized in it. The other schemes count KV in tokens sized by
	// the caller, whose weights (and so budget) were sized in some data type: for them it
	// only names that data type in Label, as KVCacheDType does.
	ModelDType sizing.DType
	// Tiers gives the paged or hybrid scheme with prefix sharing lower tiers (tiers.go):
	// host memory and disk below the device's KV budget, in blocks for paged and in bytes
	// for hybrid (split across its pools); the zero value has none.
	Tiers Tiers
}

// Label is a short unique description for tables and charts: "orca-max", "paged/16",
// "paged/16+lru", with " dtype=fp32" and " kv=fp8" after the scheme's name and sizes for
// a ModelDType and a KVCacheDType other than bf16 (the default), on every scheme alike:
// "orca-max kv=fp8", "paged/16 dtype=fp32+lru", "paged/16 dtype=fp16 kv=fp16+lru". Two
// runs that differ only in their data types then give rows of different labels.
func (s Scheme) Label() string {
	kv := ""
	if s.ModelDType != 0 && s.ModelDType != sizing.BF16 {
		kv = " dtype=" + s.ModelDType.String()
	}
	if s.KVCacheDType != 0 && s.KVCacheDType != sizing.BF16 {
		kv += " kv=" + s.KVCacheDType.String()
	}
	if !s.allocatesBlocks() {
		return s.Name + kv
	}
	l := fmt.Sprintf("%s/%d", s.Name, s.BlockSize)
	if s.Name == Hybrid {
		l = fmt.Sprintf("%s/%s", s.Name, s.Layout)
		if s.Layout != LayoutUniform {
			l += fmt.Sprintf("/%d", s.BlockSize)
			if s.StateBlock > 0 {
				l += fmt.Sprintf(" state=%d", s.StateBlock)
			}
		}
		if s.MambaMode != "" && s.MambaMode != "all" {
			l += " " + s.MambaMode
		}
	}
	l += kv
	if s.PrefixSharing {
		l += "+" + s.EvictionName()
	}
	if s.Preemption != "" && s.Preemption != "fcfs" {
		l += " preempt=" + s.Preemption
	}
	if s.Watermark > 0 {
		l += fmt.Sprintf(" wm=%g", s.Watermark)
	}
	l += s.Tiers.label()
	return l
}

// EvictionName is the eviction policy in effect: "" for a contiguous scheme, "none" for
// paging without prefix sharing (nothing is cached, so nothing is evicted), else the
// policy's name.
func (s Scheme) EvictionName() string {
	switch {
	case !s.allocatesBlocks():
		return ""
	case !s.PrefixSharing:
		return "none"
	case s.Eviction == "":
		return "lru"
	}
	return s.Eviction
}

// allocatesBlocks reports whether s is a registered scheme that allocates in blocks.
func (s Scheme) allocatesBlocks() bool {
	d, ok := lookupScheme(s.Name)
	return ok && d.blocks
}

// Validate checks s against c as Simulate does before it runs: a registered scheme, the
// options it takes and no other, and lower tiers only where it can honour them.
func (s Scheme) Validate(c *Config) error { return s.validate(c) }

func (s Scheme) validate(c *Config) error {
	d, ok := lookupScheme(s.Name)
	if !ok {
		return fmt.Errorf("%w: unknown scheme %q (%s)", ErrInvalidConfig, s.Name, strings.Join(SchemeNames(), ", "))
	}
	if s.Name != Hybrid && (s.Model != "" || s.Layout != "" || s.StateBlock != 0 || s.MambaMode != "") {
		return fmt.Errorf("%w: %s takes no model, layout, state block or Mamba mode (the hybrid scheme does)", ErrInvalidConfig, s.Name)
	}
	if d := s.ModelDType; d != 0 && d != sizing.FP16 && d != sizing.BF16 && d != sizing.FP32 {
		return fmt.Errorf("%w: %s: model data type %d (fp16, bf16 or fp32)", ErrInvalidConfig, s.Name, d)
	}
	if s.KVCacheDType != 0 && !s.KVCacheDType.Valid() {
		return fmt.Errorf("%w: %s: KV cache data type %d", ErrInvalidConfig, s.Name, s.KVCacheDType)
	}
	if !d.blocks {
		if s.BlockSize != 0 || s.PrefixSharing || s.Eviction != "" || s.Watermark != 0 || s.Preemption != "" {
			return fmt.Errorf("%w: %s takes no block size, prefix sharing, eviction, preemption or watermark", ErrInvalidConfig, s.Name)
		}
	} else if err := s.validateBlocks(c); err != nil {
		return err
	}
	if err := s.Tiers.validate(); err != nil {
		return err
	}
	if err := s.Tiers.validateFor(&s); err != nil {
		return err
	}
	if d.validate != nil {
		return d.validate(&s, c)
	}
	return nil
}

// validateBlocks checks the block options of a scheme that allocates in blocks.
func (s Scheme) validateBlocks(c *Config) error {
	if s.BlockSize < 1 || s.BlockSize > c.Capacity {
		return fmt.Errorf("%w: block size %d outside [1, KV budget %d]", ErrInvalidConfig, s.BlockSize, c.Capacity)
	}
	if !(s.Watermark >= 0 && s.Watermark < 1) {
		return fmt.Errorf("%w: watermark %v outside [0, 1)", ErrInvalidConfig, s.Watermark)
	}
	if s.PrefixSharing {
		if _, err := NewEvictionPolicy(s.EvictionName()); err != nil {
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

// NewEvictionPolicy returns the factory of the eviction policy of package evict called name
// (see evict.Names), for prefix.WithPolicy. "lru" is the index's own default.
func NewEvictionPolicy(name string) (evict.Factory, error) {
	f, err := evict.ByName(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return f, nil
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
