package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/bench/sim"
	"github.com/kvpage/kvpage/blocks/sizing"
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

// --dtype is vLLM's: the weights, the Mamba state and --kv-cache-dtype auto are sized in
// the data type given (half and float16 are fp16, float and float32 fp32), whatever the
// checkpoint's torch_dtype; a value vLLM does not take, and float16 for a model type vLLM
// refuses it for (gemma2), exit 2 with the library's typed error in the chain. Llama 3.1
// 8B: 131,072 B of KV a token and 8,030,261,248 parameters; Jamba 1.5 Mini's state is
// 28 x 155,648 values a sequence.
func TestPlanDTypeFlag(t *testing.T) {
	for _, tt := range []struct {
		dtype, kv        string
		perToken, wBytes string
	}{
		{"auto", "bf16", "131072", "16060522496"},
		{"half", "fp16", "131072", "16060522496"},
		{"float16", "fp16", "131072", "16060522496"},
		{"bfloat16", "bf16", "131072", "16060522496"},
		{"float", "fp32", "262144", "32121044992"},
		{"float32", "fp32", "262144", "32121044992"},
	} {
		obj := planJSONOf(t, 0, "plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "8k", "--dtype", tt.dtype)
		assert.Equal(t, tt.kv, obj["kv_cache_dtype"], tt.dtype)
		assert.Equal(t, tt.perToken, num(t, obj, "bytes_per_token"), tt.dtype)
		assert.Equal(t, tt.wBytes, num(t, obj, "weights_bytes"), tt.dtype)
		// An explicit --kv-cache-dtype is kept.
		obj = planJSONOf(t, 0, "plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "8k", "--dtype", tt.dtype, "--kv-cache-dtype", "fp8")
		assert.Equal(t, "fp8_e4m3", obj["kv_cache_dtype"], tt.dtype)
		assert.Equal(t, "65536", num(t, obj, "bytes_per_token"), tt.dtype)
		assert.Equal(t, tt.wBytes, num(t, obj, "weights_bytes"), tt.dtype)
	}
	state := map[string]string{}
	for _, d := range []string{"auto", "float32"} {
		obj := planJSONOf(t, 0, "plan", "--model", "jamba-1.5-mini", "--gpu", "b200", "--weights", "100GB", "--max-model-len", "8k", "--dtype", d, "--kv-cache-dtype", "fp8")
		state[d] = num(t, obj, "state_bytes_per_request_per_gpu")
	}
	assert.Equal(t, "8716288", state["auto"], "28 x 155,648 values in bf16")
	assert.Equal(t, "17432576", state["float32"], "in fp32")

	for _, c := range []struct {
		args []string
		want error
		msg  string
	}{
		{[]string{"plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--dtype", "fp16"}, sizing.ErrUnknownDType, `unknown --dtype value "fp16"; closest names: half, float16`},
		{[]string{"plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--dtype", "Float32"}, sizing.ErrUnknownDType, `--dtype value "Float32"`},
		{[]string{"plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--dtype", "fp8"}, sizing.ErrUnknownDType, "auto, half, float16, bfloat16, float, float32"},
		{[]string{"plan", "--model", "gemma-2-9b", "--gpu", "h100", "--dtype", "half"}, sizing.ErrInvalidArgument, "model type gemma2 does not run in float16"},
		{[]string{"plan", "--kv-bytes-per-token", "0.05MB", "--weights", "14GB", "--gpu", "h100", "--dtype", "half"}, nil, "--dtype has no meaning with --kv-bytes-per-token"},
		{[]string{"fleet", "--model", "llama-3.1-8b", "--gpu", "h100", "--concurrent", "100", "--avg-context", "8k", "--dtype", "bf16"}, sizing.ErrUnknownDType, `--dtype value "bf16"`},
		// sim without a model (--kv-budget-tokens) still refuses a bad value, as it does
		// a bad --kv-cache-dtype; before, both were ignored.
		{[]string{"sim", "--kv-budget-tokens", "100000", "--dtype", "fp16", "--no-charts", "--no-progress"}, sizing.ErrUnknownDType, `--dtype value "fp16"`},
		{[]string{"sim", "--kv-budget-tokens", "100000", "--kv-cache-dtype", "fp7", "--no-charts", "--no-progress"}, sizing.ErrUnknownDType, `"fp7"`},
	} {
		var out, errOut bytes.Buffer
		err := commands[c.args[0]].run(c.args[1:], &out, &errOut)
		require.Error(t, err, "%v", c.args)
		var ue *usageError
		assert.ErrorAs(t, err, &ue, "%v", c.args)
		if c.want != nil {
			assert.ErrorIs(t, err, c.want, "%v", c.args)
		}
		assert.Contains(t, err.Error(), c.msg, "%v", c.args)
		code, _, _ := runKV(c.args...)
		assert.Equal(t, 2, code, "%v", c.args)
	}
}

// sim --schemes hybrid runs the model in --dtype: float32 doubles its Mamba state, so
// with the KV kept in bf16 the state's share of the same budget grows (its pages are
// whole multiples of the attention's under per-class, so not quite twice) and the full
// attention's stays.
func TestSimHybridStateInDType(t *testing.T) {
	share, full := map[string]float64{}, map[string]float64{}
	for _, d := range []string{"auto", "float32"} {
		code, out, errOut := runKV("sim", "--schemes", "hybrid", "--hybrid-layouts", "per-class", "--model", "jamba-1.5-mini",
			"--dtype", d, "--kv-cache-dtype", "bf16", "--kv-budget-tokens", "256000", "--block-size-sweep=", "--num-prompts", "20", "--no-charts", "--no-progress", "--json")
		require.Zero(t, code, errOut)
		var rep sim.Report
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		require.NotEmpty(t, rep.Schemes)
		for _, g := range rep.Schemes[0].Groups {
			switch g.Name {
			case "state":
				share[d] = g.Share
			case "full":
				full[d] = g.Share
			}
		}
	}
	require.Positive(t, share["auto"])
	assert.Greater(t, share["float32"], 1.15*share["auto"], "%v", share)
	assert.Equal(t, full["auto"], full["float32"])
}

// A checkpoint that declares an fp8 KV cache (ModelOpt's kv_cache_quant_algo, or
// llm-compressor's compressed-tensors kv_cache_scheme) plans in fp8 under
// --kv-cache-dtype auto, as vLLM runs it, whatever --dtype; an explicit --kv-cache-dtype
// wins. Llama 3.1 8B's shape: 65,536 B of KV a token in fp8, 131,072 in bf16.
func TestPlanAutoTakesTheCheckpointsKVCacheDType(t *testing.T) {
	for _, qc := range []string{
		`{"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}`,
		`{"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": true, "dynamic": false}}`,
	} {
		cfg := filepath.Join(t.TempDir(), "config.json")
		require.NoError(t, os.WriteFile(cfg, []byte(`{"model_type": "llama", "num_hidden_layers": 32, "num_attention_heads": 32,
			"num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "quantization_config": `+qc+`}`), 0o600))
		for _, dtype := range []string{"auto", "float32"} {
			obj := planJSONOf(t, 0, "plan", "--config", cfg, "--params", "8030261248", "--gpu", "h100", "--max-model-len", "32k", "--dtype", dtype)
			assert.Equal(t, "fp8_e4m3", obj["kv_cache_dtype"], qc)
			assert.Equal(t, "65536", num(t, obj, "bytes_per_token"), qc)
			var lines []string
			for _, a := range obj["assumptions"].([]any) {
				lines = append(lines, a.(string))
			}
			assert.Contains(t, strings.Join(lines, "\n"),
				"kv cache dtype fp8_e4m3: --kv-cache-dtype auto, the KV cache data type the checkpoint's quantization_config declares", qc)
		}
		obj := planJSONOf(t, 0, "plan", "--config", cfg, "--params", "8030261248", "--gpu", "h100", "--max-model-len", "32k", "--kv-cache-dtype", "bf16")
		assert.Equal(t, "131072", num(t, obj, "bytes_per_token"), "an explicit --kv-cache-dtype wins")
	}
}
