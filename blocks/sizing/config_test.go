package sizing

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readConfig(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "configs", name))
	require.NoError(t, err)
	return data
}

// The testdata configs are the published config.json of each model, one per layout.
func TestParseHFConfigLayouts(t *testing.T) {
	full := func(layers, kv, dim int) LayerGroup {
		return LayerGroup{Layers: layers, KVHeads: kv, KHeadDim: dim, VHeadDim: dim}
	}
	sliding := func(layers, window, kv, dim int) LayerGroup {
		g := full(layers, kv, dim)
		g.Window = window
		return g
	}
	chunked := func(layers, chunk, kv, dim int) LayerGroup {
		g := sliding(layers, chunk, kv, dim)
		g.Chunked = true
		return g
	}
	tests := []struct {
		file           string
		layout         string
		name           string
		groups         []LayerGroup
		attentionHeads int
		dtype          DType
		weightDType    DType
		maxModelLen    int
		bytesPerToken  int64 // bf16, whole model
		noteContains   string
	}{
		{"llama-3.1-8b-instruct.json", "GQA", "llama", []LayerGroup{full(32, 8, 128)}, 32, BF16, 0, 131072, 131_072, ""},
		{"qwen2.5-7b-instruct.json", "GQA, sliding_window set but use_sliding_window false", "qwen2", []LayerGroup{full(28, 4, 128)}, 28, BF16, 0, 32768, 57_344, ""},
		{"deepseek-v3.json", "MLA", "deepseek_v3", []LayerGroup{{Layers: 61, LatentDim: 576}}, 128, BF16, FP8E4M3, 163840, 70_272, ""},
		{"mistral-7b-v0.1.json", "sliding window on every layer", "mistral", []LayerGroup{sliding(32, 4096, 8, 128)}, 32, BF16, 0, 32768, 131_072, "every layer"},
		{"gemma-2-9b-it.json", "interleaved by the family rule", "gemma2", []LayerGroup{sliding(21, 4096, 8, 256), full(21, 8, 256)}, 16, BF16, 0, 8192, 344_064, "even layers"},
		{"gpt-oss-20b.json", "mixed layer_types, no torch_dtype", "gpt_oss", []LayerGroup{sliding(12, 128, 8, 64), full(12, 8, 64)}, 64, 0, MXFP4, 131072, 49_152, ""},
		{"gemma-3-4b-it.json", "multimodal wrapper, 5 local : 1 global", "gemma3_text", []LayerGroup{sliding(29, 1024, 4, 256), full(5, 4, 256)}, 8, BF16, 0, 0, 139_264, "text_config"},
		{"gemma-3-27b-it.json", "multimodal wrapper, 62 layers, 5 local : 1 global", "gemma3_text", []LayerGroup{sliding(52, 1024, 16, 128), full(10, 16, 128)}, 32, BF16, 0, 131072, 507_904, "sliding_window_pattern absent"},
		{"llama-4-scout-17b-16e-instruct.json", "chunked local attention, empty no_rope_layers", "llama4_text", []LayerGroup{chunked(36, 8192, 8, 128), full(12, 8, 128)}, 40, BF16, 0, 10485760, 196_608, "one global (NoPE) layer every 4"},
		{"qwen3-next-80b-a3b-instruct.json", "Gated DeltaNet and gated attention, full_attention_interval", "qwen3_next", []LayerGroup{{Layers: 36, StateValues: 548_864}, full(12, 2, 256)}, 16, BF16, 0, 262144, 24_576, "full_attention_interval 4"},
		{"ai21-jamba-1.5-mini.json", "Mamba and attention, attn_layer_period", "jamba", []LayerGroup{{Layers: 28, StateValues: 155_648}, full(4, 8, 128)}, 32, BF16, 0, 262144, 16_384, "i % 8 == 4"},
	}
	for _, tt := range tests {
		t.Run(tt.file+" ("+tt.layout+")", func(t *testing.T) {
			m, err := ParseHFConfig(readConfig(t, tt.file))
			require.NoError(t, err)
			assert.Equal(t, tt.name, m.Name)
			assert.Equal(t, tt.groups, m.Groups)
			assert.Equal(t, tt.attentionHeads, m.AttentionHeads)
			assert.Equal(t, tt.dtype, m.DType)
			assert.Equal(t, tt.weightDType, m.WeightDType)
			assert.Equal(t, tt.maxModelLen, m.MaxModelLen)
			b, err := m.KVBitsPerToken(BF16)
			require.NoError(t, err)
			assert.Equal(t, Bits(tt.bytesPerToken*8), b)
			if tt.noteContains != "" {
				assert.Contains(t, strings.Join(m.Notes, "\n"), tt.noteContains)
			}
		})
	}
}

func TestParseHFConfigRules(t *testing.T) {
	tests := []struct {
		name   string
		json   string
		groups []LayerGroup
		notes  string
	}{
		{"head_dim null: hidden_size / heads",
			`{"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 256, "head_dim": null}`,
			[]LayerGroup{{Layers: 2, KVHeads: 2, KHeadDim: 64, VHeadDim: 64}}, ""},
		{"no num_key_value_heads: multi-head attention",
			`{"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256}`,
			[]LayerGroup{{Layers: 2, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}}, "num_key_value_heads absent"},
		{"head_dim wins over hidden_size / heads (Qwen3, Gemma 2 27B)",
			`{"num_hidden_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 16, "hidden_size": 4608, "head_dim": 128}`,
			[]LayerGroup{{Layers: 2, KVHeads: 16, KHeadDim: 128, VHeadDim: 128}}, ""},
		{"v_head_dim differs from head_dim",
			`{"num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 8, "head_dim": 192, "v_head_dim": 128}`,
			[]LayerGroup{{Layers: 3, KVHeads: 8, KHeadDim: 192, VHeadDim: 128}}, ""},
		{"integral floats are integers",
			`{"num_hidden_layers": 2.0, "num_attention_heads": 4, "head_dim": 64.0}`,
			[]LayerGroup{{Layers: 2, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}}, ""},
		{"sliding_window null: full attention",
			`{"model_type": "mixtral", "num_hidden_layers": 4, "num_attention_heads": 4, "head_dim": 64, "sliding_window": null}`,
			[]LayerGroup{{Layers: 4, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}}, ""},
		{"qwen2 without use_sliding_window: its default, false",
			`{"model_type": "qwen2", "num_hidden_layers": 4, "num_attention_heads": 4, "head_dim": 64, "sliding_window": 4096}`,
			[]LayerGroup{{Layers: 4, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}}, ""},
		{"qwen2 with use_sliding_window: from max_window_layers on",
			`{"model_type": "qwen2", "num_hidden_layers": 4, "num_attention_heads": 4, "head_dim": 64, "sliding_window": 4096, "use_sliding_window": true, "max_window_layers": 3}`,
			[]LayerGroup{{Layers: 3, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}, {Layers: 1, Window: 4096, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}}, ""},
		{"gemma3 with an explicit sliding_window_pattern",
			`{"model_type": "gemma3_text", "num_hidden_layers": 8, "num_attention_heads": 4, "head_dim": 64, "sliding_window": 512, "sliding_window_pattern": 4}`,
			[]LayerGroup{{Layers: 6, Window: 512, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}, {Layers: 2, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}}, "every 4"},
		{"cohere2 defaults to one global layer in 4",
			`{"model_type": "cohere2", "num_hidden_layers": 8, "num_attention_heads": 4, "head_dim": 64, "sliding_window": 4096}`,
			[]LayerGroup{{Layers: 6, Window: 4096, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}, {Layers: 2, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}}, "default 4"},
		{"gpt_oss without layer_types alternates from a sliding layer 0",
			`{"model_type": "gpt_oss", "num_hidden_layers": 3, "num_attention_heads": 4, "head_dim": 64, "sliding_window": 128}`,
			[]LayerGroup{{Layers: 2, Window: 128, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}, {Layers: 1, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}}, "even layers"},
		{"layer_types wins over the family rule",
			`{"model_type": "gemma2", "num_hidden_layers": 3, "num_attention_heads": 4, "head_dim": 64, "sliding_window": 4096, "layer_types": ["full_attention", "full_attention", "sliding_attention"]}`,
			[]LayerGroup{{Layers: 2, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}, {Layers: 1, Window: 4096, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}}, ""},
		{"chunked attention (Llama 4) holds at most a chunk",
			`{"model_type": "llama4_text", "num_hidden_layers": 4, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "attention_chunk_size": 8192, "layer_types": ["chunked_attention", "chunked_attention", "chunked_attention", "full_attention"]}`,
			[]LayerGroup{{Layers: 3, Window: 8192, Chunked: true, KVHeads: 8, KHeadDim: 128, VHeadDim: 128}, {Layers: 1, KVHeads: 8, KHeadDim: 128, VHeadDim: 128}}, ""},
		{"layer_types with linear_attention (Qwen3.5)",
			`{"model_type": "qwen3_5_text", "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"], "linear_conv_kernel_dim": 4, "linear_num_key_heads": 16, "linear_key_head_dim": 128, "linear_num_value_heads": 32, "linear_value_head_dim": 128}`,
			[]LayerGroup{{Layers: 3, StateValues: 3*(2*16*128+32*128) + 32*128*128}, {Layers: 1, KVHeads: 2, KHeadDim: 256, VHeadDim: 256}}, "recurrent"},
		{"layers_block_type (Jamba), Mamba defaults",
			`{"model_type": "jamba", "num_hidden_layers": 3, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "layers_block_type": ["mamba", "attention", "mamba"]}`,
			[]LayerGroup{{Layers: 2, StateValues: 3*8192 + 8192*16}, {Layers: 1, KVHeads: 8, KHeadDim: 128, VHeadDim: 128}}, "mamba_d_state absent"},
		{"Jamba without its interleave: JambaConfig's period 8, offset 4",
			`{"model_type": "jamba", "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2}`,
			[]LayerGroup{{Layers: 14, StateValues: 155_648}, {Layers: 2, KVHeads: 8, KHeadDim: 128, VHeadDim: 128}}, "attn_layer_period absent"},
		{"Llama 4 no_rope_layers given: 1 is chunked, 0 global",
			`{"model_type": "llama4_text", "num_hidden_layers": 4, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "attention_chunk_size": 4096, "no_rope_layers": [0, 1, 1, 0]}`,
			[]LayerGroup{{Layers: 2, KVHeads: 8, KHeadDim: 128, VHeadDim: 128}, {Layers: 2, Window: 4096, Chunked: true, KVHeads: 8, KHeadDim: 128, VHeadDim: 128}}, "RoPE layers"},
		{"Llama 4 no_rope_layer_interval",
			`{"model_type": "llama4_text", "num_hidden_layers": 4, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "attention_chunk_size": 8192, "no_rope_layer_interval": 2}`,
			[]LayerGroup{{Layers: 2, Window: 8192, Chunked: true, KVHeads: 8, KHeadDim: 128, VHeadDim: 128}, {Layers: 2, KVHeads: 8, KHeadDim: 128, VHeadDim: 128}}, "every 2"},
		{"text_config falls back to top-level fields",
			`{"model_type": "llava", "torch_dtype": "float16", "text_config": {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4}, "hidden_size": 256}`,
			[]LayerGroup{{Layers: 2, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}}, "text_config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseHFConfig([]byte(tt.json))
			require.NoError(t, err)
			assert.Equal(t, tt.groups, m.Groups)
			if tt.notes != "" {
				assert.Contains(t, strings.Join(m.Notes, "\n"), tt.notes)
			}
		})
	}
}

func TestParseHFConfigDTypes(t *testing.T) {
	tests := []struct {
		json   string
		dtype  DType
		weight DType
		note   string
	}{
		{`{"torch_dtype": "float16"}`, FP16, 0, ""},
		{`{"dtype": "bfloat16"}`, BF16, 0, ""}, // transformers 4.56+ writes dtype
		{`{"torch_dtype": "float32"}`, FP32, 0, ""},
		{`{}`, 0, 0, ""},
		{`{"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8"}}`, BF16, FP8E4M3, ""},
		{`{"torch_dtype": "float16", "quantization_config": {"quant_method": "awq", "bits": 4}}`, FP16, MXFP4, "4-bit"},
		{`{"torch_dtype": "float16", "quantization_config": {"quant_method": "gptq", "bits": 8}}`, FP16, INT8, ""},
		{`{"torch_dtype": "float16", "quantization_config": {"quant_method": "bitsandbytes"}}`, FP16, 0, "model's data type"},
	}
	for _, tt := range tests {
		t.Run(tt.json, func(t *testing.T) {
			cfg := strings.Replace(tt.json, "{", `{"num_hidden_layers": 1, "num_attention_heads": 1, "head_dim": 8, `, 1)
			cfg = strings.Replace(cfg, ", }", "}", 1)
			m, err := ParseHFConfig([]byte(cfg))
			require.NoError(t, err, cfg)
			assert.Equal(t, tt.dtype, m.DType)
			assert.Equal(t, tt.weight, m.WeightDType)
			if tt.note != "" {
				assert.Contains(t, strings.Join(m.Notes, "\n"), tt.note)
			}
		})
	}
}

func TestParseHFConfigErrors(t *testing.T) {
	tests := []struct {
		name  string
		json  string
		err   error
		field string // the field the error names
	}{
		{"not JSON", `{"num_hidden_layers": `, ErrBadConfig, ""},
		{"not an object", `[1, 2]`, ErrBadConfig, ""},
		{"null", `null`, ErrBadConfig, ""},
		{"over MaxConfigBytes", `{"num_hidden_layers": 32, "num_attention_heads": 32, "head_dim": 128}` + strings.Repeat(" ", MaxConfigBytes), ErrBadConfig, ""},
		{"no layers", `{"num_attention_heads": 32, "head_dim": 128}`, ErrMissingField, "num_hidden_layers"},
		{"no attention heads", `{"num_hidden_layers": 32, "num_key_value_heads": 8, "head_dim": 128}`, ErrMissingField, "num_attention_heads"},
		{"no head_dim nor hidden_size", `{"num_hidden_layers": 32, "num_attention_heads": 32}`, ErrMissingField, "head_dim"},
		{"MLA without qk_rope_head_dim", `{"num_hidden_layers": 61, "kv_lora_rank": 512}`, ErrMissingField, "qk_rope_head_dim"},
		{"layers as a string", `{"num_hidden_layers": "32", "num_attention_heads": 32, "head_dim": 128}`, ErrBadConfig, "num_hidden_layers"},
		{"fractional heads", `{"num_hidden_layers": 32, "num_attention_heads": 32.5, "head_dim": 128}`, ErrBadConfig, "num_attention_heads"},
		{"negative layers", `{"num_hidden_layers": -1, "num_attention_heads": 32, "head_dim": 128}`, ErrBadConfig, "num_hidden_layers"},
		{"absurd layers", `{"num_hidden_layers": 2000000000, "num_attention_heads": 32, "head_dim": 128}`, ErrBadConfig, "num_hidden_layers"},
		{"zero layers", `{"num_hidden_layers": 0, "num_attention_heads": 32, "head_dim": 128}`, ErrBadConfig, "num_hidden_layers"},
		{"zero kv heads", `{"num_hidden_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 0, "head_dim": 128}`, ErrBadConfig, "num_key_value_heads"},
		{"hidden_size not a multiple of heads", `{"num_hidden_layers": 2, "num_attention_heads": 3, "hidden_size": 100}`, ErrBadConfig, "hidden_size"},
		{"layer_types too short", `{"num_hidden_layers": 3, "num_attention_heads": 4, "head_dim": 64, "sliding_window": 128, "layer_types": ["sliding_attention"]}`, ErrBadConfig, "layer_types"},
		{"sliding layers without a window", `{"num_hidden_layers": 1, "num_attention_heads": 4, "head_dim": 64, "layer_types": ["sliding_attention"]}`, ErrMissingField, "sliding_window"},
		{"linear attention without its state sizes", `{"num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "layer_types": ["linear_attention", "full_attention"]}`, ErrMissingField, "linear_conv_kernel_dim"},
		{"full_attention_interval 0", `{"num_hidden_layers": 4, "num_attention_heads": 4, "head_dim": 64, "full_attention_interval": 0}`, ErrBadConfig, "full_attention_interval"},
		{"Jamba offset beyond its period", `{"model_type": "jamba", "num_hidden_layers": 4, "num_attention_heads": 4, "head_dim": 64, "attn_layer_period": 2, "attn_layer_offset": 2}`, ErrBadConfig, "attn_layer_offset"},
		{"Mamba conv kernel 1", `{"model_type": "jamba", "num_hidden_layers": 4, "num_attention_heads": 4, "hidden_size": 256, "mamba_d_conv": 1}`, ErrBadConfig, "mamba_d_conv"},
		{"Mamba state beyond any model", `{"num_hidden_layers": 1, "num_attention_heads": 4, "hidden_size": 1048576, "mamba_expand": 1048576, "layer_types": ["mamba"]}`, ErrBadConfig, "mamba_expand"},
		{"no_rope_layers too short", `{"model_type": "llama4_text", "num_hidden_layers": 4, "num_attention_heads": 4, "head_dim": 64, "attention_chunk_size": 8, "no_rope_layers": [1, 0]}`, ErrBadConfig, "no_rope_layers"},
		{"no_rope_layers not 0 or 1", `{"model_type": "llama4_text", "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64, "attention_chunk_size": 8, "no_rope_layers": [1, 7]}`, ErrBadConfig, "no_rope_layers"},
		{"unknown layer type", `{"num_hidden_layers": 1, "num_attention_heads": 4, "head_dim": 64, "layer_types": ["cross_attention"]}`, ErrBadConfig, "layer_types"},
		{"chunked without a chunk size", `{"num_hidden_layers": 1, "num_attention_heads": 4, "head_dim": 64, "layer_types": ["chunked_attention"]}`, ErrMissingField, "attention_chunk_size"},
		{"qwen sliding without max_window_layers", `{"model_type": "qwen2", "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64, "sliding_window": 64, "use_sliding_window": true}`, ErrMissingField, "max_window_layers"},
		{"use_sliding_window not a boolean", `{"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64, "use_sliding_window": "no"}`, ErrBadConfig, "use_sliding_window"},
		{"unknown torch_dtype", `{"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64, "torch_dtype": "float12"}`, ErrBadConfig, "torch_dtype"},
		{"text_config not an object", `{"text_config": 3}`, ErrBadConfig, "text_config"},
		{"missing field named inside text_config", `{"text_config": {"num_attention_heads": 4, "head_dim": 64}}`, ErrMissingField, "text_config.num_hidden_layers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHFConfig([]byte(tt.json))
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.err)
			if tt.field != "" {
				var fe *FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, tt.field, fe.Field)
				assert.Contains(t, err.Error(), tt.field)
			}
		})
	}
}

func FuzzParseHFConfig(f *testing.F) {
	for _, name := range []string{"llama-3.1-8b-instruct.json", "deepseek-v3.json", "gemma-3-4b-it.json", "gpt-oss-20b.json",
		"qwen3-next-80b-a3b-instruct.json", "ai21-jamba-1.5-mini.json", "llama-4-scout-17b-16e-instruct.json", "gemma-3-27b-it.json"} {
		f.Add(readConfig(f, name))
	}
	f.Add([]byte(`{"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64, "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 8}`))
	f.Add([]byte(`{"text_config": {"num_hidden_layers": 2e9, "num_attention_heads": 4, "head_dim": 1}}`))
	// Nesting at and past MaxConfigDepth, and brackets in a string.
	f.Add([]byte(validWith(nested(MaxConfigDepth-1, true))))
	f.Add([]byte(validWith(nested(MaxConfigDepth, false))))
	f.Add([]byte(validWith(`"\"` + strings.Repeat("[", 100) + `"`)))
	// A checkpoint's KV cache data type, in both forms vLLM reads, and hostile variants.
	const shape = `{"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64, "quantization_config": `
	for _, qc := range []string{
		`{"quant_method": "modelopt", "kv_cache_quant_algo": "FP8"}`,
		`{"quant_method": "modelopt", "quantization": {"kv_cache_scheme": {"dynamic": false, "num_bits": 8, "type": "float"}}}`,
		`{"quant_method": "modelopt_fp4", "kv_cache_scheme": {"num_bits": 4.0, "type": "float"}, "kv_cache_quant_algo": 7}`,
		`{"quant_method": "modelopt", "quantization": [], "kv_cache_quant_algo": "` + strings.Repeat("x", 1000) + `"}`,
		`{"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": true}}`,
		`{"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 1e400, "strategy": "attn_head", "symmetric": 1}}`,
		`{"quant_method": "compressed-tensors", "kv_cache_scheme": ` + nested(MaxConfigDepth-3, true) + `}`,
	} {
		f.Add([]byte(shape + qc + "}"))
	}
	// A latent-only (MLA) model with a compressed-tensors scheme, which auto does not take.
	f.Add([]byte(`{"num_hidden_layers": 2, "num_attention_heads": 4, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "quantization_config": ` +
		`{"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": true}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseHFConfig(data)
		if err != nil {
			return
		}
		switch m.KVDType {
		case 0, FP8E4M3, NVFP4:
		default:
			t.Fatalf("a checkpoint declares fp8_e4m3, nvfp4 or nothing, not %v", m.KVDType)
		}
		auto, err := ResolveCacheDType("auto", m)
		require.NoError(t, err)
		require.True(t, auto.Valid())
		if m.KVDType == 0 {
			require.Equal(t, m.ServingDType(), auto)
		}
		require.NoError(t, m.Validate(), "a config that parses describes a valid model")
		b, err := m.KVBitsPerToken(FP16)
		require.NoError(t, err)
		require.Positive(t, int64(b)+m.StateBytes(FP16), "a model caches tokens or a state")
		l, err := NewKVLayout(m, NVFP4, 1, 16)
		require.NoError(t, err)
		require.LessOrEqual(t, l.BytesPerRequest(1), l.BytesPerRequest(MaxTokens))
	})
}
