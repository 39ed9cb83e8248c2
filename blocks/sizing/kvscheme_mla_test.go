package sizing

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vLLM's compressed-tensors rule (a kv_cache_scheme makes --kv-cache-dtype auto fp8) is
// applied by its Attention layer alone: a DeepSeek-style model, whose every layer is
// MLAAttention, keeps auto, so its latent cache is the model's data type. ModelOpt's
// declaration is resolved for the whole model (resolve_kv_cache_dtype_string) and reaches
// MLA too; an explicit --kv-cache-dtype fp8 is fp8 either way. DeepSeek-V3's shape: 61
// layers x (512 + 64) values, 70,272 B a token in bf16, 35,136 in fp8. Before, the
// compressed-tensors checkpoint was sized at 35,136 under auto.
func TestMLATakesNoCompressedTensorsKVSchemeUnderAuto(t *testing.T) {
	const ct8 = `{"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": true, "dynamic": false}`
	for _, tt := range []struct {
		name, qc string
		auto     DType
		note     string
	}{
		{"compressed-tensors", `{"quant_method": "compressed-tensors", "kv_cache_scheme": ` + ct8 + `}`, BF16, "does not take for MLA layers"},
		{"modelopt", `{"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}`, FP8E4M3, "(ModelOpt)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := `{"model_type": "deepseek_v3", "num_hidden_layers": 61, "num_attention_heads": 128, "kv_lora_rank": 512,
				"qk_rope_head_dim": 64, "torch_dtype": "bfloat16", "quantization_config": ` + tt.qc + `}`
			m, err := ParseHFConfig([]byte(cfg))
			require.NoError(t, err)
			assert.Equal(t, tt.auto, m.AutoCacheDType())
			assert.Contains(t, strings.Join(m.Notes, "\n"), tt.note)
			want := map[DType]Bits{BF16: 8 * 70272, FP8E4M3: 8 * 35136}
			d, err := ResolveCacheDType("auto", m)
			require.NoError(t, err)
			b, err := m.KVBitsPerToken(d)
			require.NoError(t, err)
			assert.Equal(t, want[tt.auto], b)
			d, err = ResolveCacheDType("fp8", m)
			require.NoError(t, err)
			b, err = m.KVBitsPerToken(d)
			require.NoError(t, err)
			assert.Equal(t, want[FP8E4M3], b)
		})
	}
	// A scheme vLLM's CompressedTensorsKVCacheMethod refuses is still refused.
	_, err := ParseHFConfig([]byte(`{"model_type": "deepseek_v3", "num_hidden_layers": 61, "num_attention_heads": 128,
		"kv_lora_rank": 512, "qk_rope_head_dim": 64, "quantization_config": {"quant_method": "compressed-tensors",
		"kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true}}}`))
	require.ErrorIs(t, err, ErrBadConfig)
}
