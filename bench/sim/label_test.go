package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kvpage/kvpage/blocks/sizing"
)

// Every scheme's label names a KV cache data type other than bf16 in one place, after
// its name and sizes; before, only the hybrid rows' did, so an fp8 run's paged and
// contiguous rows read as bf16's. Without a data type, or with bf16, the labels are
// the ones the default output has always printed.
func TestLabelNamesTheKVDTypeOnEveryScheme(t *testing.T) {
	for _, c := range []struct {
		s         Scheme
		plain, kv string
	}{
		{Scheme{Name: OrcaMax}, "orca-max", "orca-max kv=fp8_e4m3"},
		{Scheme{Name: OrcaOracle}, "orca-oracle", "orca-oracle kv=fp8_e4m3"},
		{Scheme{Name: Paged, BlockSize: 16}, "paged/16", "paged/16 kv=fp8_e4m3"},
		{Scheme{Name: Paged, BlockSize: 32, PrefixSharing: true, Preemption: "priority", Watermark: 0.01},
			"paged/32+lru preempt=priority wm=0.01", "paged/32 kv=fp8_e4m3+lru preempt=priority wm=0.01"},
		{Scheme{Name: Paged, BlockSize: 16, PrefixSharing: true, Tiers: Tiers{HostBlocks: 100}},
			"paged/16+lru host=100", "paged/16 kv=fp8_e4m3+lru host=100"},
		{Scheme{Name: Hybrid, Model: "jamba-1.5-mini", Layout: LayoutUniform, BlockSize: 16, PrefixSharing: true},
			"hybrid/uniform+lru", "hybrid/uniform kv=fp8_e4m3+lru"},
		{Scheme{Name: Hybrid, Model: "jamba-1.5-mini", Layout: LayoutCarved, BlockSize: 16, StateBlock: 64, MambaMode: "align"},
			"hybrid/carved/16 state=64 align", "hybrid/carved/16 state=64 align kv=fp8_e4m3"},
	} {
		for _, d := range []sizing.DType{0, sizing.BF16} {
			c.s.KVCacheDType = d
			assert.Equal(t, c.plain, c.s.Label(), "%s in %v", c.plain, d)
		}
		c.s.KVCacheDType = sizing.FP8E4M3
		assert.Equal(t, c.kv, c.s.Label())
	}
}

// A model data type other than bf16 is named on every scheme, before the KV cache's:
// a float32 run's rows (whose weights leave a smaller budget) read differently from a
// bf16 run's. Without one, or with bf16, the labels are unchanged.
func TestLabelNamesTheModelDTypeOnEveryScheme(t *testing.T) {
	for _, c := range []struct {
		s          Scheme
		plain, f32 string
	}{
		{Scheme{Name: OrcaMax}, "orca-max", "orca-max dtype=fp32"},
		{Scheme{Name: Paged, BlockSize: 16}, "paged/16", "paged/16 dtype=fp32"},
		{Scheme{Name: Paged, BlockSize: 32, PrefixSharing: true, Preemption: "priority"},
			"paged/32+lru preempt=priority", "paged/32 dtype=fp32+lru preempt=priority"},
		{Scheme{Name: Hybrid, Model: "jamba-1.5-mini", Layout: LayoutCarved, BlockSize: 16, StateBlock: 64, MambaMode: "align"},
			"hybrid/carved/16 state=64 align", "hybrid/carved/16 state=64 align dtype=fp32"},
	} {
		for _, d := range []sizing.DType{0, sizing.BF16} {
			c.s.ModelDType = d
			assert.Equal(t, c.plain, c.s.Label(), "%s in %v", c.plain, d)
		}
		c.s.ModelDType = sizing.FP32
		assert.Equal(t, c.f32, c.s.Label())
	}
	s := Scheme{Name: Paged, BlockSize: 16, PrefixSharing: true, ModelDType: sizing.FP16, KVCacheDType: sizing.FP16}
	assert.Equal(t, "paged/16 dtype=fp16 kv=fp16+lru", s.Label())
}
