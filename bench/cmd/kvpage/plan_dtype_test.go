package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A config.json without torch_dtype, or with float32, plans as vLLM runs it: --dtype auto
// takes no torch_dtype as float32 and runs float32 in bf16 (GPUs of compute capability
// 8.0+, every preset), so the KV cache under --kv-cache-dtype auto, the weights and the
// state are bf16. Before, no torch_dtype exited 2 and float32 sized everything in fp32.
// Llama 3.1 8B's shape: 131,072 B of KV a token and 2 bytes a parameter in bf16.
func TestPlanConfigDTypeAsVLLMRunsIt(t *testing.T) {
	tests := []struct {
		torchDType string
		why        string // the assumption line's explanation
	}{
		{"", "the data type vLLM runs the model in: no torch_dtype, so its default float32, which --dtype auto runs in bf16"},
		{`, "torch_dtype": "float32"`, "the data type vLLM runs the model in: torch_dtype fp32, which --dtype auto runs in bf16"},
		{`, "torch_dtype": "bfloat16"`, "the model's torch_dtype"},
	}
	for _, tt := range tests {
		t.Run(tt.torchDType, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "config.json")
			require.NoError(t, os.WriteFile(cfg, []byte(`{"model_type": "llama", "num_hidden_layers": 32, "num_attention_heads": 32,
				"num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072`+tt.torchDType+`}`), 0o600))
			obj := planJSONOf(t, 0, "plan", "--config", cfg, "--params", "8030261248", "--gpu", "h100", "--max-model-len", "32k")
			assert.Equal(t, "bf16", obj["kv_cache_dtype"])
			assert.Equal(t, "131072", num(t, obj, "bytes_per_token"))
			assert.Equal(t, "16060522496", num(t, obj, "weights_bytes"))
			var lines []string
			for _, a := range obj["assumptions"].([]any) {
				lines = append(lines, a.(string))
			}
			all := strings.Join(lines, "\n")
			assert.Contains(t, all, "kv cache dtype bf16: --kv-cache-dtype auto, "+tt.why)
			assert.Contains(t, all, "8,030,261,248 parameters x 16 bits (bf16)")
		})
	}
}
