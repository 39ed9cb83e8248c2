package hybrid

import (
	"fmt"
	"sort"
)

// Kinds of the built-in specs, as NewSpec names them.
const (
	KindFullAttention = "full_attention"
	KindMLA           = "mla"
	KindSlidingWindow = "sliding_window"
	KindChunkedLocal  = "chunked_local"
	KindMamba         = "mamba"
	KindNonCacheable  = "non_cacheable"
)

// Params are what a spec may be built from; each kind reads the fields it needs.
type Params struct {
	BlockSize int    // tokens per block
	PageBytes int64  // bytes per block over the group's layers
	Window    int    // sliding window, tokens
	Chunk     int    // attention chunk, tokens
	MambaMode string // MambaNone or MambaAlign
}

// Builder makes a Spec from Params.
type Builder func(Params) (Spec, error)

var registry = map[string]Builder{
	KindFullAttention: func(p Params) (Spec, error) { return FullAttention{Block: p.BlockSize, Bytes: p.PageBytes}, nil },
	KindMLA: func(p Params) (Spec, error) {
		return FullAttention{Block: p.BlockSize, Bytes: p.PageBytes, MLA: true}, nil
	},
	KindSlidingWindow: func(p Params) (Spec, error) {
		return SlidingWindow{Block: p.BlockSize, Window: p.Window, Bytes: p.PageBytes}, nil
	},
	KindChunkedLocal: func(p Params) (Spec, error) {
		return ChunkedLocal{Block: p.BlockSize, Chunk: p.Chunk, Bytes: p.PageBytes}, nil
	},
	KindMamba: func(p Params) (Spec, error) {
		mode := p.MambaMode
		if mode == "" {
			mode = MambaNone
		}
		return Mamba{Block: p.BlockSize, Bytes: p.PageBytes, Mode: mode}, nil
	},
	KindNonCacheable: func(p Params) (Spec, error) { return NonCacheable{Block: p.BlockSize, Bytes: p.PageBytes}, nil },
}

// Register adds a kind of spec under name, for NewSpec. It fails for an empty name, a nil
// builder or a name already taken. Register at init time: the registry is not locked.
func Register(name string, b Builder) error {
	if name == "" || b == nil {
		return fmt.Errorf("%w: register %q", errInvalid, name)
	}
	if _, ok := registry[name]; ok {
		return fmt.Errorf("%w: spec kind %q already registered", errInvalid, name)
	}
	registry[name] = b
	return nil
}

// NewSpec builds the spec of kind name from p and validates it.
func NewSpec(name string, p Params) (Spec, error) {
	b, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("%w: unknown spec kind %q", errInvalid, name)
	}
	s, err := b(p)
	if err != nil {
		return nil, err
	}
	if err := validate(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Kinds lists the registered kinds, sorted.
func Kinds() []string {
	out := make([]string, 0, len(registry))
	for k := range registry {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
