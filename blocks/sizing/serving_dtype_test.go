package sizing

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vLLM's --dtype auto (vllm/config/model.py: _find_dtype, _resolve_auto_dtype) on a GPU of
// compute capability 8.0+, where CudaPlatformBase.supported_dtypes is [bf16, fp16, fp32]:
// a float32 config dtype (torch_dtype float32, or none at all: _find_dtype's float32
// default when no safetensors metadata is at hand) is downcast to bf16, the first; fp16
// and bf16 are supported and kept; a dtype not in the list (fp8, int8) falls back to the
// first, bf16. --kv-cache-dtype auto is that dtype (kv_cache_dtype_str_to_dtype returns
// model_config.dtype). Before, float32 stayed FP32 and no torch_dtype was refused.
func TestServingDTypeIsVLLMsDTypeAuto(t *testing.T) {
	tests := []struct {
		config string // torch_dtype as config.json writes it; "" for none
		dtype  DType  // ModelSpec.DType: what the config says
		served DType  // what vLLM runs the model in, and --kv-cache-dtype auto
		note   string
	}{
		{"", 0, BF16, "no torch_dtype: vLLM takes the checkpoint's safetensors dtype, else float32"},
		{"float32", FP32, BF16, "torch_dtype float32: vLLM's --dtype auto runs it in bf16"},
		{"float16", FP16, FP16, ""},
		{"bfloat16", BF16, BF16, ""},
		{"float8_e4m3fn", FP8E4M3, BF16, "falls back to bf16"},
	}
	for _, tt := range tests {
		t.Run(tt.config, func(t *testing.T) {
			cfg := `{"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128`
			if tt.config != "" {
				cfg += `, "torch_dtype": "` + tt.config + `"`
			}
			m, err := ParseHFConfig([]byte(cfg + "}"))
			require.NoError(t, err)
			assert.Equal(t, tt.dtype, m.DType, "DType keeps what the config says")
			assert.Equal(t, tt.served, m.ServingDType())
			d, err := ResolveCacheDType("auto", m)
			require.NoError(t, err, "--kv-cache-dtype auto plans without torch_dtype")
			assert.Equal(t, tt.served, d)
			notes := strings.Join(m.Notes, "\n")
			if tt.note == "" {
				assert.NotContains(t, notes, "torch_dtype")
			} else {
				assert.Contains(t, notes, tt.note)
			}

			// Llama 3.1 8B's layers and parameters: KV 131,072 B a token and weights
			// 2 bytes a parameter in bf16 or fp16, never fp32's 262,144 B and 4 bytes.
			m.Params, m.MaxModelLen = 8_030_261_248, 131072
			g, err := GPUPreset("h100")
			require.NoError(t, err)
			p, err := NewPlan(PlanConfig{Model: m, GPU: g})
			require.NoError(t, err)
			assert.Equal(t, tt.served, p.Config.CacheDType)
			assert.Equal(t, Bits(131_072*8), p.BytesPerToken)
			assert.Equal(t, int64(16_060_522_496), p.WeightsTotal)
		})
	}
}

// The Mamba state takes the served dtype too (--mamba-cache-dtype auto): a Jamba config
// saying float32 holds the state vLLM holds for its published bfloat16 one, 28 x 311,296
// bytes, not twice that.
func TestStateDTypeOfAFloat32Config(t *testing.T) {
	bf, err := ParseHFConfig(readConfig(t, "ai21-jamba-1.5-mini.json"))
	require.NoError(t, err)
	raw := strings.Replace(string(readConfig(t, "ai21-jamba-1.5-mini.json")), `"torch_dtype": "bfloat16"`, `"torch_dtype": "float32"`, 1)
	f32, err := ParseHFConfig([]byte(raw))
	require.NoError(t, err)
	require.Equal(t, FP32, f32.DType)
	for _, kv := range []DType{FP32, BF16, FP8E4M3} {
		l, err := NewKVLayout(f32, kv, 1, 16)
		require.NoError(t, err)
		assert.Equal(t, int64(28*311_296), l.StateBytesPerRequest(), "kv %s", kv)
		lb, err := NewKVLayout(bf, kv, 1, 16)
		require.NoError(t, err)
		assert.Equal(t, lb.BytesPerRequest(4096), l.BytesPerRequest(4096), "kv %s", kv)
	}
}
