package sizing

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Below compute capability 8.0 vLLM's --dtype auto runs a model in fp16 where it would
// run it in bf16 (every torch_dtype: fp32 is downcast to the platform's first type,
// bf16 falls back to it), and the five model types that refuse fp16 in fp32; the KV
// cache under --kv-cache-dtype auto follows. Before, a T4 or V100 plan sized them as on
// an A100: the same bytes for most models, half of them for gemma2/3, plamo2 and glm4.
func TestServingDTypeOnPreAmpereGPUs(t *testing.T) {
	t4, err := GPUPreset("t4")
	require.NoError(t, err)
	v100, err := GPUPreset("v100")
	require.NoError(t, err)
	a100, err := GPUPreset("a100")
	require.NoError(t, err)
	for _, c := range []struct {
		modelType string
		config    DType
		pre, post DType
	}{
		{"llama", BF16, FP16, BF16},
		{"llama", FP32, FP16, BF16},
		{"llama", 0, FP16, BF16},
		{"llama", FP16, FP16, FP16},
		{"gemma2", BF16, FP32, BF16},
		{"gemma3", FP16, FP32, BF16},
		{"glm4", FP32, FP32, BF16},
		{"plamo2", 0, FP32, BF16},
	} {
		m := ModelSpec{ModelType: c.modelType, DType: c.config}
		for _, g := range []GPU{t4, v100} {
			on, err := m.OnGPU(g)
			require.NoError(t, err)
			assert.Equal(t, c.pre, on.ServingDType(), "%s %v on %s", c.modelType, c.config, g.Name)
			assert.Equal(t, c.pre, on.AutoCacheDType(), "%s %v on %s", c.modelType, c.config, g.Name)
		}
		for _, g := range []GPU{a100, {Name: "custom GPU", MemoryMiB: 1 << 14}} {
			on, err := m.OnGPU(g)
			require.NoError(t, err)
			assert.Equal(t, c.post, on.ServingDType(), "%s %v on %s", c.modelType, c.config, g.Name)
		}
		// A checkpoint's declared KV cache data type is auto's on any GPU.
		m.KVDType = FP8E4M3
		on, err := m.OnGPU(t4)
		require.NoError(t, err)
		assert.Equal(t, FP8E4M3, on.AutoCacheDType())
	}
	// Back on a newer GPU the model is planned as before.
	on, err := ModelSpec{ModelType: "gemma2", DType: BF16}.OnGPU(t4)
	require.NoError(t, err)
	on, err = on.OnGPU(a100)
	require.NoError(t, err)
	assert.Equal(t, BF16, on.ServingDType())
}

// --dtype bfloat16 on a GPU below compute capability 8.0 is refused, as vLLM refuses to
// start; float16 and float32 run there. The refusal is ErrDTypeNotOnGPU, an
// ErrInvalidArgument, and NewPlan returns it too.
func TestBF16IsRefusedBelowAmpere(t *testing.T) {
	t4, err := GPUPreset("t4")
	require.NoError(t, err)
	m, err := ModelPreset("llama-3-8b")
	require.NoError(t, err)
	bf, err := m.WithRunDType(BF16)
	require.NoError(t, err)
	_, err = bf.OnGPU(t4)
	require.ErrorIs(t, err, ErrDTypeNotOnGPU)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.ErrorContains(t, err, "t4 has 7.5")
	_, err = NewPlan(PlanConfig{Model: bf, GPU: t4, MaxModelLen: 2048})
	require.ErrorIs(t, err, ErrDTypeNotOnGPU)
	for _, d := range []DType{0, FP16, FP32} {
		r, err := m.WithRunDType(d)
		require.NoError(t, err)
		on, err := r.OnGPU(t4)
		require.NoError(t, err, d)
		if d != 0 {
			assert.Equal(t, d, on.ServingDType())
		}
	}
	_, err = m.OnGPU(GPU{Name: "odd", MemoryMiB: 1, ComputeCapability: -1})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// A plan on a T4 sizes gemma-2-9b's weights and KV cache in fp32, as vLLM's --dtype auto
// runs it there: twice the bytes a token of the same plan on a custom GPU of the T4's
// memory (assumed 8.0 or later, so bf16).
func TestPlanOnAT4SizesGemmaInFP32(t *testing.T) {
	t4, err := GPUPreset("t4")
	require.NoError(t, err)
	m, err := ModelPreset("gemma-2-9b")
	require.NoError(t, err)
	custom := GPU{Name: "custom GPU", MemoryMiB: t4.MemoryMiB}
	on, err := NewPlan(PlanConfig{Model: m, GPU: t4, MaxModelLen: 1024, WeightBytes: 1 << 30})
	require.NoError(t, err)
	off, err := NewPlan(PlanConfig{Model: m, GPU: custom, MaxModelLen: 1024, WeightBytes: 1 << 30})
	require.NoError(t, err)
	assert.Equal(t, FP32, on.Config.CacheDType)
	assert.Equal(t, BF16, off.Config.CacheDType)
	assert.Equal(t, 2*off.BytesPerToken, on.BytesPerToken)
	w, err := on.Config.Model.TotalWeightBytes()
	require.NoError(t, err)
	w0, err := off.Config.Model.TotalWeightBytes()
	require.NoError(t, err)
	assert.Equal(t, 2*w0, w)
}
