package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks/sizing"
)

// The hybrid scheme sizes its attention pages in Scheme.KVCacheDType and its Mamba /
// linear-attention state in the model's data type (vLLM: the attention specs take
// --kv-cache-dtype, MambaSpec mamba_cache_dtype, auto the model's). Under the per-class
// layout a kind's page is its layers' bytes of BlockSize tokens, or of one state: in an
// 8-bit cache every attention kind's page, and the token-equivalent (HybridTokenBytes),
// is half its bf16 size, and every state page the same.
func TestHybridSchemeSizesKVInItsDType(t *testing.T) {
	cfg := DefaultConfig(100000)
	for _, tc := range []struct {
		dtype sizing.DType
		num   int64 // attention bytes against bf16's: num/2
	}{
		{0, 2}, // bf16
		{sizing.BF16, 2},
		{sizing.FP16, 2},
		{sizing.FP32, 4},
		{sizing.FP8E4M3, 1},
		{sizing.FP8E5M2, 1},
		{sizing.INT8, 1},
	} {
		for _, h := range sizing.HybridPresets() {
			s := Scheme{Name: Hybrid, Model: h.Name, Layout: LayoutPerClass, BlockSize: 16, PrefixSharing: true}
			base, err := newHybridAlloc(&cfg, s, nil, true)
			require.NoError(t, err, h.Name)
			s.KVCacheDType = tc.dtype
			require.NoError(t, s.Validate(&cfg), "%s %v", h.Name, tc.dtype)
			a, err := newHybridAlloc(&cfg, s, nil, true)
			require.NoError(t, err, "%s %v", h.Name, tc.dtype)
			name := h.Name + " " + s.Label()

			b16, err := HybridTokenBytes(h.Name, sizing.BF16, 1)
			require.NoError(t, err)
			got, err := HybridTokenBytes(h.Name, tc.dtype, 1)
			require.NoError(t, err)
			assert.Equal(t, b16*tc.num/2, got, "%s: bytes per token of the attention layers", name)
			assert.Equal(t, got, a.unit, "%s: the scheme's token-equivalent", name)

			require.Len(t, a.kindBytes, len(h.Layers))
			for i, l := range h.Layers {
				if l.Kind == sizing.KindState {
					assert.Equal(t, base.kindBytes[i], a.kindBytes[i], "%s: a state page keeps the model's data type", name)
					continue
				}
				assert.Equal(t, base.kindBytes[i]*tc.num/2, a.kindBytes[i], "%s: a %s page", name, l.Kind)
			}
		}
	}
}

// A KV cache data type must be a valid one, on every scheme (the others only name it in
// their labels).
func TestHybridSchemeRefusesBadKVDType(t *testing.T) {
	cfg := DefaultConfig(100000)
	for _, s := range []Scheme{{Name: Paged, BlockSize: 16}, {Name: OrcaMax}} {
		s.KVCacheDType = sizing.FP8E4M3
		require.NoError(t, s.Validate(&cfg), s.Name)
		s.KVCacheDType = sizing.MXFP4 + 1
		require.ErrorIs(t, s.Validate(&cfg), ErrInvalidConfig, s.Name)
	}
	hyb := Scheme{Name: Hybrid, Model: "jamba-1.5-mini", Layout: LayoutUniform, BlockSize: 16, KVCacheDType: sizing.MXFP4 + 1}
	require.ErrorIs(t, hyb.Validate(&cfg), ErrInvalidConfig)
	_, err := HybridTokenBytes("jamba-1.5-mini", sizing.MXFP4+1, 1)
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// The hybrid scheme's Mamba / linear-attention state is in the data type the model runs
// in, Scheme.ModelDType (vLLM's --dtype; mamba_cache_dtype auto follows it): fp32 doubles
// every state page and leaves the attention pages in their KV data type. fp16 is refused
// for Gemma 3, as vLLM refuses it, and a type no model runs in on every scheme.
func TestHybridSchemeSizesStateInModelDType(t *testing.T) {
	cfg := DefaultConfig(100000)
	for _, h := range sizing.HybridPresets() {
		s := Scheme{Name: Hybrid, Model: h.Name, Layout: LayoutPerClass, BlockSize: 16, PrefixSharing: true, KVCacheDType: sizing.FP8E4M3}
		base, err := newHybridAlloc(&cfg, s, nil, true)
		require.NoError(t, err, h.Name)
		for _, tc := range []struct {
			run sizing.DType
			num int64 // state bytes against bf16's: num/2
		}{{sizing.BF16, 2}, {sizing.FP32, 4}, {sizing.FP16, 2}} {
			s.ModelDType = tc.run
			if tc.run == sizing.FP16 && h.Name == "gemma-3-27b" {
				require.ErrorIs(t, s.Validate(&cfg), ErrInvalidConfig)
				continue
			}
			require.NoError(t, s.Validate(&cfg), "%s %v", h.Name, tc.run)
			a, err := newHybridAlloc(&cfg, s, nil, true)
			require.NoError(t, err)
			assert.Equal(t, base.unit, a.unit, "%s: attention bytes a token stay fp8", h.Name)
			for i, l := range h.Layers {
				want := base.kindBytes[i]
				if l.Kind == sizing.KindState {
					want = want * tc.num / 2
				}
				assert.Equal(t, want, a.kindBytes[i], "%s --dtype %v: a %s page", h.Name, tc.run, l.Kind)
			}
		}
	}
	for _, d := range []sizing.DType{sizing.FP8E4M3, sizing.MXFP4 + 1} {
		for _, s := range []Scheme{{Name: Paged, BlockSize: 16}, {Name: Hybrid, Model: "jamba-1.5-mini", Layout: LayoutUniform, BlockSize: 16}} {
			s.ModelDType = d
			require.ErrorIs(t, s.Validate(&cfg), ErrInvalidConfig, "%s %v", s.Name, d)
		}
	}
}
