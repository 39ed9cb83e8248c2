package sizing

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vLLM's --kv-cache-dtype auto takes the KV cache data type a checkpoint's
// quantization_config declares (vllm/utils/torch_utils.py get_kv_cache_quant_algo_string
// and resolve_kv_cache_dtype_string for ModelOpt; the Attention layer's kv_cache_scheme
// rule for compressed-tensors, with CompressedTensorsKVCacheMethod's validation), in place
// of the model's data type. Llama 3.1 8B's shape: 131,072 B of KV a token in bf16, 65,536
// in fp8, 36,864 in nvfp4 (4.5 bits a value). Before, every one of them was bf16.
func TestAutoTakesTheCheckpointsKVCacheDType(t *testing.T) {
	const scheme8 = `{"dynamic": false, "num_bits": 8, "type": "float"}`
	const ct8 = `{"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": true, "dynamic": false}`
	for _, tt := range []struct {
		name, qc string
		want     DType // 0: auto is the model's data type
		bad      bool  // vLLM would not start: ErrBadConfig
	}{
		{"modelopt string", `{"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}`, FP8E4M3, false},
		{"modelopt scheme", `{"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_scheme": ` + scheme8 + `}`, FP8E4M3, false},
		{"modelopt scheme 8.0 bits", `{"quant_method": "modelopt", "kv_cache_scheme": {"dynamic": false, "num_bits": 8.0, "type": "float"}}`, FP8E4M3, false},
		{"modelopt fp4 scheme", `{"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_scheme": {"num_bits": 4, "type": "float"}}`, NVFP4, false},
		{"modelopt_fp4 method", `{"quant_method": "modelopt_fp4", "kv_cache_quant_algo": "nvfp4"}`, NVFP4, false},
		{"modelopt nested", `{"quant_method": "modelopt", "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "fp8"}}`, FP8E4M3, false},
		{"modelopt nested scheme first", `{"quant_method": "modelopt", "kv_cache_quant_algo": "nvfp4", "quantization": {"kv_cache_scheme": ` + scheme8 + `}}`, FP8E4M3, false},
		{"modelopt empty scheme falls through", `{"quant_method": "modelopt", "kv_cache_scheme": {}, "kv_cache_quant_algo": "FP8"}`, FP8E4M3, false},
		{"modelopt null scheme falls through", `{"quant_method": "modelopt", "kv_cache_scheme": null, "kv_cache_quant_algo": "FP8"}`, FP8E4M3, false},
		{"modelopt mixed_precision", `{"quant_method": "modelopt", "kv_cache_quant_algo": "mixed_precision"}`, 0, false},
		{"modelopt unknown name", `{"quant_method": "modelopt", "kv_cache_quant_algo": "int8"}`, 0, false},
		{"modelopt long name", `{"quant_method": "modelopt", "kv_cache_quant_algo": "` + strings.Repeat("f", 100) + `"}`, 0, false},
		{"modelopt dynamic scheme", `{"quant_method": "modelopt", "kv_cache_scheme": {"dynamic": true, "num_bits": 8, "type": "float"}}`, 0, false},
		{"modelopt scheme without dynamic", `{"quant_method": "modelopt", "kv_cache_scheme": {"num_bits": 8, "type": "float"}}`, 0, false},
		{"modelopt scheme string bits", `{"quant_method": "modelopt", "kv_cache_scheme": {"dynamic": false, "num_bits": "8", "type": "float"}}`, 0, false},
		{"modelopt number", `{"quant_method": "modelopt", "kv_cache_quant_algo": 8}`, 0, false},
		{"modelopt none", `{"quant_method": "modelopt", "quant_algo": "FP8"}`, 0, false},
		{"modelopt quantization not an object", `{"quant_method": "modelopt", "quantization": "fp8"}`, 0, true},
		{"compressed-tensors", `{"quant_method": "compressed-tensors", "kv_cache_scheme": ` + ct8 + `}`, FP8E4M3, false},
		{"compressed-tensors per head", `{"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "attn_head", "symmetric": true}}`, FP8E4M3, false},
		{"compressed-tensors int8 passes vLLM's check", `{"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "int", "strategy": "tensor", "symmetric": true}}`, FP8E4M3, false},
		{"compressed-tensors no scheme", `{"quant_method": "compressed-tensors", "kv_cache_scheme": null}`, 0, false},
		{"compressed-tensors 4-bit int", `{"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 4, "type": "int", "strategy": "tensor", "symmetric": true}}`, 0, true},
		{"compressed-tensors channel", `{"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true}}`, 0, true},
		{"compressed-tensors asymmetric", `{"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": false}}`, 0, true},
		{"compressed-tensors scheme a string", `{"quant_method": "compressed-tensors", "kv_cache_scheme": "fp8"}`, 0, true},
		{"fp8 declares none", `{"quant_method": "fp8", "kv_cache_scheme": ` + ct8 + `}`, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := `{"model_type": "llama", "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
				"head_dim": 128, "torch_dtype": "bfloat16", "quantization_config": ` + tt.qc + `}`
			m, err := ParseHFConfig([]byte(cfg))
			if tt.bad {
				require.ErrorIs(t, err, ErrBadConfig)
				var fe *FieldError
				require.ErrorAs(t, err, &fe)
				assert.Contains(t, fe.Field, "quantization_config")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, m.KVDType)
			want := tt.want
			if want == 0 {
				want = BF16
				assert.NotContains(t, strings.Join(m.Notes, "\n"), "--kv-cache-dtype auto takes")
			} else {
				assert.Contains(t, strings.Join(m.Notes, "\n"), "the checkpoint's KV cache is "+want.String()+", which --kv-cache-dtype auto takes")
			}
			for _, run := range []DType{0, FP32} { // --dtype changes only an undeclared one
				r, err := m.WithRunDType(run)
				require.NoError(t, err)
				want := want
				if tt.want == 0 && run != 0 {
					want = run
				}
				d, err := ResolveCacheDType("auto", r)
				require.NoError(t, err)
				assert.Equal(t, want, d)
				p, err := NewPlan(PlanConfig{Model: r, GPU: GPU{Name: "g", MemoryMiB: 81559}, WeightBytes: 16e9, MaxModelLen: 8192})
				require.NoError(t, err)
				assert.Equal(t, want, p.Config.CacheDType, "PlanConfig's 0 is auto too")
				assert.Equal(t, Bits(8*131_072*want.BitsPerValue()/16), p.BytesPerToken)
			}
			d, err := ResolveCacheDType("bf16", m)
			require.NoError(t, err)
			assert.Equal(t, BF16, d, "an explicit --kv-cache-dtype wins")
		})
	}
}
