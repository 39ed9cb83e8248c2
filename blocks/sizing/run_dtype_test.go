package sizing

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vLLM's --dtype takes exactly auto, half, float16, bfloat16, float and float32
// (vllm/config/model.py ModelDType), half and float16 meaning torch.float16, float and
// float32 torch.float32 (_STR_DTYPE_TO_TORCH_DTYPE). Every other spelling is refused,
// with vLLM's name for a data type given under another one.
func TestParseModelDTypeIsVLLMsDType(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want DType
	}{{"auto", 0}, {"half", FP16}, {"float16", FP16}, {"bfloat16", BF16}, {"float", FP32}, {"float32", FP32}} {
		d, err := ParseModelDType(tt.in)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, d, tt.in)
	}
	for _, tt := range []struct {
		in      string
		closest []string
	}{
		{"fp16", []string{"half", "float16"}},
		{"bf16", []string{"bfloat16"}},
		{"FLOAT32", []string{"float", "float32"}},
		{"fp8", ModelDTypeNames()},
		{"", nil},
		{"float64", nil},
		{" half", []string{"half", "float16"}},
	} {
		d, err := ParseModelDType(tt.in)
		assert.Zero(t, d, tt.in)
		require.ErrorIs(t, err, ErrUnknownDType, "%q", tt.in)
		var ue *UnknownNameError
		require.True(t, errors.As(err, &ue))
		assert.Equal(t, tt.in, ue.Name)
		if tt.closest != nil {
			assert.Equal(t, tt.closest, ue.Closest, "%q", tt.in)
		}
		assert.Contains(t, err.Error(), "--dtype value")
	}
	assert.Equal(t, []string{"auto", "half", "float16", "bfloat16", "float", "float32"}, ModelDTypeNames())
}

// --dtype other than auto sizes the weights, the Mamba state and --kv-cache-dtype auto in
// the data type given, whatever torch_dtype says (vLLM up- and downcasts between the
// three). Qwen3-Next (bf16, 48 layers: 12 full attention, 36 Gated DeltaNet) and Llama
// 3.1 8B (bf16, 131,072 B of KV a token, 8,030,261,248 parameters).
func TestWithRunDTypeSizesWeightsStateAndAuto(t *testing.T) {
	next, err := ModelPreset("qwen3-next-80b-a3b")
	require.NoError(t, err)
	llama, err := ModelPreset("llama-3.1-8b")
	require.NoError(t, err)
	require.Equal(t, BF16, next.ServingDType())
	stateBF16 := next.StateBytes(BF16)
	require.Positive(t, stateBF16)
	for _, tt := range []struct {
		run        DType
		served     DType
		weights    int64 // llama 3.1 8B
		stateTimes float64
	}{
		{0, BF16, 16_060_522_496, 1},
		{BF16, BF16, 16_060_522_496, 1},
		{FP16, FP16, 16_060_522_496, 1},
		{FP32, FP32, 32_121_044_992, 2},
	} {
		t.Run(tt.run.String(), func(t *testing.T) {
			m, err := llama.WithRunDType(tt.run)
			require.NoError(t, err)
			assert.Equal(t, tt.served, m.ServingDType())
			w, err := m.TotalWeightBytes()
			require.NoError(t, err)
			assert.Equal(t, tt.weights, w)
			d, err := ResolveCacheDType("auto", m)
			require.NoError(t, err)
			assert.Equal(t, tt.served, d, "--kv-cache-dtype auto")
			p, err := NewPlan(PlanConfig{Model: m, GPU: GPU{Name: "g", MemoryMiB: 81559}, MaxModelLen: 8192})
			require.NoError(t, err)
			assert.Equal(t, tt.served, p.Config.CacheDType)
			assert.Equal(t, Bits(131_072*8*int64(tt.served.BitsPerValue())/16), p.BytesPerToken, "bits of KV a token")

			n, err := next.WithRunDType(tt.run)
			require.NoError(t, err)
			l, err := NewKVLayout(n, FP8E4M3, 1, 16)
			require.NoError(t, err)
			assert.Equal(t, int64(float64(stateBF16)*tt.stateTimes), l.StateBytesPerRequest(), "the state follows --dtype, not --kv-cache-dtype")
			h, err := n.Hybrid(FP8E4M3)
			require.NoError(t, err)
			hb, err := next.Hybrid(FP8E4M3)
			require.NoError(t, err)
			for i := range h.Layers {
				assert.Equal(t, int64(float64(hb.Layers[i].StateBytes)*tt.stateTimes), h.Layers[i].StateBytes)
				assert.Equal(t, hb.Layers[i].TokenBytes, h.Layers[i].TokenBytes, "fp8 KV stays fp8")
			}
		})
	}
	// A float32 config under --dtype float32 stays float32, and its auto-note goes.
	m, err := ParseHFConfig([]byte(`{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
		"num_key_value_heads": 2, "head_dim": 8, "torch_dtype": "float32"}`))
	require.NoError(t, err)
	require.Len(t, m.Notes, 1)
	m32, err := m.WithRunDType(FP32)
	require.NoError(t, err)
	assert.Equal(t, FP32, m32.ServingDType())
	assert.Empty(t, m32.Notes, "the --dtype auto note no longer applies")
	assert.Len(t, m.Notes, 1, "the receiver keeps its notes")
}

// vLLM refuses float16 for gemma2, gemma3, gemma3_text, plamo2 and glm4
// (_FLOAT16_NOT_SUPPORTED_MODELS, _check_valid_dtype), and --dtype auto never picks it for
// them: a float16 torch_dtype falls back to bf16 (_resolve_auto_dtype).
func TestWithRunDTypeRefusesWhatVLLMRefuses(t *testing.T) {
	gemma, err := ModelPreset("gemma-2-9b")
	require.NoError(t, err)
	require.Equal(t, "gemma2", gemma.ModelType)
	for _, d := range []DType{FP16, FP8E4M3, INT8, NVFP4, DType(200)} {
		m, err := gemma.WithRunDType(d)
		require.ErrorIs(t, err, ErrInvalidArgument, "%v", d)
		assert.Equal(t, gemma, m, "unchanged")
	}
	for _, d := range []DType{0, BF16, FP32} {
		m, err := gemma.WithRunDType(d)
		require.NoError(t, err)
		assert.NotEqual(t, FP16, m.ServingDType())
	}
	for _, mt := range []string{"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4", "llama"} {
		m, err := ParseHFConfig([]byte(`{"model_type": "` + mt + `", "num_hidden_layers": 2, "num_attention_heads": 4,
			"num_key_value_heads": 2, "head_dim": 8, "torch_dtype": "float16"}`))
		require.NoError(t, err)
		want := BF16
		if mt == "llama" {
			want = FP16
		}
		assert.Equal(t, want, m.ServingDType(), mt)
	}
	bad := ModelSpec{Name: "x", Groups: []LayerGroup{{Layers: 1, KVHeads: 1, KHeadDim: 8, VHeadDim: 8}}, RunDType: FP8E4M3}
	assert.ErrorIs(t, bad.Validate(), ErrInvalidArgument)
}
