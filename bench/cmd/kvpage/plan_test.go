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
)

// runKV runs the kvpage command line as main does and returns its exit code and output.
func runKV(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// planJSONOf runs a command with --json and decodes its one object.
func planJSONOf(t *testing.T, wantCode int, args ...string) map[string]any {
	t.Helper()
	code, out, errOut := runKV(append(args, "--json")...)
	require.Equal(t, wantCode, code, "stderr: %s", errOut)
	var obj map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&obj), out)
	assert.False(t, dec.More(), "one JSON object on stdout")
	return obj
}

func num(t *testing.T, obj map[string]any, key string) string {
	t.Helper()
	v, ok := obj[key]
	require.True(t, ok, "missing key %s", key)
	n, ok := v.(json.Number)
	require.True(t, ok, "%s is %T, not a number", key, v)
	return n.String()
}

func TestPlanJSON(t *testing.T) {
	obj := planJSONOf(t, 0, "plan", "--model", "llama-3.1-70b", "--gpu", "h100-80gb", "--tensor-parallel-size", "4", "--max-model-len", "32K", "--kv-cache-dtype", "fp8")
	want := map[string]string{
		"bytes_per_token":           "163840", // 327,680 halved by fp8, whole model
		"bytes_per_token_per_gpu":   "40960",  // 2 of 8 KV heads per GPU
		"bytes_per_request":         "5368709120",
		"bytes_per_request_per_gpu": "1342177280",
		"bytes_per_block":           "655360",
		"num_blocks":                "60339",
		"kv_cache_tokens":           "965424",
		"max_concurrency":           "29",
		"max_context_one_request":   "965424",
		"max_model_len":             "32768",
		"tensor_parallel_size":      "4",
		"gpu_memory_mib":            "81559",
		"weights_bytes":             "141107412992",
	}
	for k, v := range want {
		assert.Equal(t, v, num(t, obj, k), k)
	}
	assert.Equal(t, true, obj["fits"])
	assert.Equal(t, "fp8_e4m3", obj["kv_cache_dtype"])
	assert.Equal(t, "kv-cache", obj["limited_by"])
	assert.NotContains(t, obj, "message")
	assert.NotEmpty(t, obj["assumptions"])
}

func TestPlanPublishedFigures(t *testing.T) {
	tests := []struct {
		args     []string
		perToken string
		request  string
	}{
		{[]string{"--model", "llama-3-70b", "--max-model-len", "32K", "--kv-cache-dtype", "fp16"}, "327680", "10737418240"},              // 10 GiB
		{[]string{"--model", "llama-3-70b", "--max-model-len", "128K", "--kv-cache-dtype", "fp16", "-tp", "2"}, "327680", "42949672960"}, // 40 GiB
		{[]string{"--model", "llama-3-8b", "--max-model-len", "8K", "--kv-cache-dtype", "fp16"}, "131072", "1073741824"},                 // 1 GiB
		{[]string{"--model", "llama-3-70b", "--max-model-len", "32K", "--kv-cache-dtype", "fp8"}, "163840", "5368709120"},                // halved
		{[]string{"--model", "deepseek-v3", "--max-model-len", "1K", "--kv-cache-dtype", "bf16", "-tp", "8"}, "70272", "71958528"},       // MLA
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			obj := planJSONOf(t, 0, append([]string{"plan", "--gpu", "b200"}, tt.args...)...)
			assert.Equal(t, tt.perToken, num(t, obj, "bytes_per_token"))
			assert.Equal(t, tt.request, num(t, obj, "bytes_per_request"))
		})
	}
}

func TestPlanFractionalBytesPerToken(t *testing.T) {
	// One layer, one head of K dim 1 and V dim 2 in nvfp4: 4 + 8 (a scale) bits for K,
	// 8 + 8 for V = 28 bits = 3.5 bytes.
	cfg := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"model_type": "tiny", "num_hidden_layers": 1, "num_attention_heads": 1,
		"head_dim": 1, "v_head_dim": 2, "max_position_embeddings": 64, "torch_dtype": "bfloat16"}`), 0o600))
	obj := planJSONOf(t, 0, "plan", "--config", cfg, "--params", "1k", "--gpu", "rtx-4090", "--kv-cache-dtype", "fp4")
	assert.Equal(t, "3.5", num(t, obj, "bytes_per_token"))
	assert.Equal(t, "3.5", num(t, obj, "bytes_per_token_per_gpu"))
	assert.Equal(t, "56", num(t, obj, "bytes_per_block"))
	assert.Equal(t, "nvfp4", obj["kv_cache_dtype"])
}

func TestPlanTable(t *testing.T) {
	code, out, errOut := runKV("plan", "-m", "llama-3.1-8b", "--gpu", "h100", "--context", "32k")
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
	for _, want := range []string{
		"llama-3.1-8b on 1 x h100-80gb, KV cache bf16, max-model-len 32,000",
		"KV cache per token, whole model    131,072 B",
		"128.00 KiB",
		"max concurrency at 32,000 tokens",
		"limited by the KV cache",
		"fits                               yes",
		"assumptions:",
		"81,559 MiB (NVIDIA H100 80GB HBM3, as nvidia-smi reports it)",
		"--gpu-memory-utilization 0.90",
		"runtime overhead 2.00 GiB per GPU",
		"8,030,261,248 parameters x 16 bits (bf16)",
		"--kv-cache-dtype auto",
		"block size 16 tokens",
		"32 full-attention layers x 8 KV heads x (128 K + 128 V) values",
	} {
		assert.Contains(t, out, want)
	}
}

func TestPlanAliasesAndSizes(t *testing.T) {
	base := []string{"plan", "--model", "llama-3.1-8b", "--gpu", "h100-80gb"}
	a := planJSONOf(t, 0, append(base, "--max-model-len", "32k", "--tensor-parallel-size", "2")...)
	b := planJSONOf(t, 0, append(base, "--context", "32000", "-tp", "2")...)
	assert.Equal(t, a, b, "--context is --max-model-len, -tp is --tensor-parallel-size, 32k is 32,000")
	c := planJSONOf(t, 0, append(base, "--context", "32K")...)
	assert.Equal(t, "32768", num(t, c, "max_model_len"))
	d := planJSONOf(t, 0, append(base, "--context", "25.6k")...)
	assert.Equal(t, "25600", num(t, d, "max_model_len"))
}

func TestPlanMaxModelLenAuto(t *testing.T) {
	// 70B on 2 x H100 cannot hold its 128K: auto takes the longest that fits, as vLLM's
	// --max-model-len auto does, and the plan then fits.
	obj := planJSONOf(t, 0, "plan", "--model", "llama-3.1-70b", "--gpu", "h100", "-tp", "2", "--max-model-len", "auto")
	assert.Equal(t, "26032", num(t, obj, "max_model_len"))
	assert.Equal(t, num(t, obj, "max_context_one_request"), num(t, obj, "max_model_len"))
	assert.Equal(t, "1", num(t, obj, "max_concurrency"))
	assert.Contains(t, obj["assumptions"], "max-model-len auto: 26,032 tokens, the longest context that fits (the model allows 131,072)")
	// A model that fits whole keeps its own maximum.
	obj = planJSONOf(t, 0, "plan", "--model", "llama-3.1-8b", "--gpu", "b200", "--max-model-len", "-1")
	assert.Equal(t, "131072", num(t, obj, "max_model_len"))
}

func TestPlanDoesNotFit(t *testing.T) {
	args := []string{"plan", "--model", "llama-3.1-70b", "--gpu", "h100-80gb", "--tensor-parallel-size", "2", "--max-model-len", "32K"}
	code, out, errOut := runKV(args...)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "fits                               NO")
	assert.Contains(t, out, "26,032 tokens")
	assert.Contains(t, errOut, "kvpage plan: does not fit")
	assert.Contains(t, errOut, "max seq len is larger than the maximum number of tokens that can be stored in KV cache")
	assert.Contains(t, errOut, "--max-model-len 26032")

	obj := planJSONOf(t, 1, args...)
	assert.Equal(t, false, obj["fits"])
	assert.Equal(t, "0", num(t, obj, "max_concurrency"))
	assert.Equal(t, "26032", num(t, obj, "max_context_one_request"))
	assert.Contains(t, obj["message"], "does not fit")

	// The weights alone too much: said plainly.
	code, _, errOut = runKV("plan", "--model", "llama-3.1-405b", "--gpu", "h100")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no room for KV cache")
}

func TestPlanUnboundedContext(t *testing.T) {
	obj := planJSONOf(t, 0, "plan", "--model", "mistral-7b", "--gpu", "h100")
	assert.Nil(t, obj["max_context_one_request"])
	assert.Equal(t, true, obj["max_context_unbounded"])
}

func TestPlanConfigFile(t *testing.T) {
	cfg := filepath.Join("..", "..", "..", "blocks", "sizing", "testdata", "configs", "deepseek-v3.json")
	obj := planJSONOf(t, 0, "plan", "--config", cfg, "--params", "671.026b", "--gpu", "h200", "-tp", "8", "--context", "32K")
	assert.Equal(t, "70272", num(t, obj, "bytes_per_token"))
	assert.Equal(t, "70272", num(t, obj, "bytes_per_token_per_gpu"), "the MLA latent is replicated")
	assert.Equal(t, "671026000000", num(t, obj, "weights_bytes"), "fp8 weights: a byte a parameter")
	assert.Contains(t, obj["model"], "deepseek_v3")
}

func TestPlanBadValues(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(missing, []byte(`{"num_attention_heads": 32, "head_dim": 128}`), 0o600))
	huge := filepath.Join(t.TempDir(), "huge.json")
	require.NoError(t, os.WriteFile(huge, nil, 0o600))
	require.NoError(t, os.Truncate(huge, 1<<32), "a sparse 4 GiB file: read whole, it would take 4 GiB")
	base := []string{"plan", "--model", "llama-3.1-8b", "--gpu", "h100"}
	tests := []struct {
		name string
		args []string
		code int
		want []string // in stderr
	}{
		{"bad size", append(base, "--max-model-len", "32q"), 2, []string{"-max-model-len", `"32q"`}},
		{"negative size", append(base, "--context", "-5"), 2, []string{"-context", "negative"}},
		{"binary suffix with decimals", append(base, "--context", "2.5K"), 2, []string{"did you mean 2.5k"}},
		{"zero context", append(base, "--context", "0"), 2, []string{"--max-model-len must be between 2"}},
		{"negative TP", append(base, "-tp", "-2"), 2, []string{"--tensor-parallel-size", "-2"}},
		{"zero TP", append(base, "--tensor-parallel-size", "0"), 2, []string{"--tensor-parallel-size"}},
		{"TP not a number", append(base, "-tp", "two"), 2, []string{"-tp"}},
		{"TP the heads forbid", append(base, "-tp", "3"), 2, []string{"tensor parallel size 3 does not divide the 32 attention heads"}},
		{"utilization", append(base, "--gpu-memory-utilization", "1.2"), 2, []string{"--gpu-memory-utilization"}},
		{"block size", append(base, "--block-size", "0"), 2, []string{"--block-size"}},
		{"negative overhead", append(base, "--overhead-gib", "-1"), 2, []string{"--overhead-gib"}},
		{"cache dtype", append(base, "--kv-cache-dtype", "fp9"), 2, []string{"--kv-cache-dtype", "fp9"}},
		{"unknown model", []string{"plan", "--model", "llama-3.1-7b", "--gpu", "h100"}, 2, []string{`unknown model "llama-3.1-7b"`, "closest presets: llama-3.1-8b"}},
		{"unknown GPU", []string{"plan", "--model", "llama-3.1-8b", "--gpu", "h10"}, 2, []string{`unknown GPU "h10"`, "h100-80gb"}},
		{"no model", []string{"plan", "--gpu", "h100"}, 2, []string{"--model", "llama-3.1-70b"}},
		{"no GPU", []string{"plan", "--model", "llama-3.1-8b"}, 2, []string{"--gpu", "h100-80gb"}},
		{"model and config", append(base, "--config", missing), 2, []string{"give one of --model, --config and --kv-bytes-per-token"}},
		{"config without params", []string{"plan", "--config", filepath.Join("..", "..", "..", "blocks", "sizing", "testdata", "configs", "mistral-7b-v0.1.json"), "--gpu", "h100"}, 2, []string{"--params"}},
		{"config missing a field", []string{"plan", "--config", missing, "--params", "8b", "--gpu", "h100"}, 2, []string{"num_hidden_layers", "missing"}},
		{"config not there", []string{"plan", "--config", missing + ".nope", "--params", "8b", "--gpu", "h100"}, 2, []string{"--config", "no such file"}},
		{"config too large", []string{"plan", "--config", huge, "--params", "8b", "--gpu", "h100"}, 2, []string{"--config", "over the 1048576"}},
		{"bad params", []string{"plan", "--config", missing, "--params", "8q", "--gpu", "h100"}, 2, []string{"-params"}},
		{"stray argument", append(base, "now"), 2, []string{`unexpected argument "now"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, asJSON := range []bool{false, true} {
				args := tt.args
				if asJSON {
					args = append(append([]string{}, args...), "--json")
				}
				code, out, errOut := runKV(args...)
				assert.Equal(t, tt.code, code, errOut)
				assert.Empty(t, out, "nothing printed as if it were a result")
				for _, w := range tt.want {
					assert.Contains(t, errOut, w)
				}
			}
		})
	}
}

func TestCountValue(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"8030261248", 8_030_261_248, true},
		{"8.03b", 8_030_000_000, true},
		{"70.6B", 70_600_000_000, true},
		{"1.5t", 1_500_000_000_000, true},
		{"500m", 500_000_000, true},
		{"7g", 7_000_000_000, true},
		{"0.5k", 500, true},
		{"", 0, false},
		{"b", 0, false},
		{"-8b", 0, false},
		{"0", 0, false},
		{"1e9", 0, false},
		{"1/2b", 0, false},
		{"8q", 0, false},
		{"99999999t", 0, false},
	}
	for _, tt := range tests {
		var v countValue
		err := v.Set(tt.in)
		if !tt.ok {
			assert.Error(t, err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, v.n, tt.in)
	}
}

func TestCommasAndHuman(t *testing.T) {
	assert.Equal(t, "0", commas(0))
	assert.Equal(t, "999", commas(999))
	assert.Equal(t, "1,000", commas(1000))
	assert.Equal(t, "131,072", commas(131072))
	assert.Equal(t, "-1,234,567", commas(-1234567))
	assert.Equal(t, "512 B", human(512))
	assert.Equal(t, "320.00 KiB", human(327680))
	assert.Equal(t, "10.00 GiB", human(10<<30))
}

// The textbook's figures from bytes alone, the total budget across GPUs, and a request
// size given directly.
func TestPlanFromFigures(t *testing.T) {
	base := []string{"plan", "--gpu-memory", "80GB", "--gpu-memory-utilization", "1", "--weights", "14GB", "--overhead", "5GB", "--kv-bytes-per-token", "0.05MB"}
	obj := planJSONOf(t, 0, append(base, "--max-model-len", "4k")...)
	assert.Equal(t, "50000", num(t, obj, "bytes_per_token"))
	assert.Equal(t, "61000000000", num(t, obj, "kv_cache_bytes_per_gpu"))
	assert.Equal(t, "305", num(t, obj, "max_concurrency"))
	// Over 2 GPUs the weights split: 80 - 7 - 5 = 68 GB of KV cache each, 136 GB in all.
	obj = planJSONOf(t, 0, append(base, "--max-model-len", "4k", "-tp", "2")...)
	assert.Equal(t, "68000000000", num(t, obj, "kv_cache_bytes_per_gpu"))
	assert.Equal(t, "136000000000", num(t, obj, "kv_cache_bytes"))
	assert.Equal(t, "25000", num(t, obj, "bytes_per_token_per_gpu"))
	code, out, errOut := runKV(append(base, "--max-model-len", "4k", "-tp", "2")...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "KV cache budget, total             136.00 GB (126.66 GiB)  across the 2 GPUs")
	// --kv-bytes-per-request: 61 GB / 250 MB = 244 requests, whatever max-model-len says.
	obj = planJSONOf(t, 0, append(base, "--max-model-len", "4k", "--kv-bytes-per-request", "250MB")...)
	over, ok := obj["kv_bytes_per_request"].(map[string]any)
	require.True(t, ok)
	assert.Equal(t, "244", over["max_concurrency"].(json.Number).String())
}
