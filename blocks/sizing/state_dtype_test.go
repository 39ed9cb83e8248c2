package sizing

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withoutDType is a config fixture with its torch_dtype removed.
func withoutDType(t *testing.T, name string) []byte {
	t.Helper()
	var c map[string]any
	require.NoError(t, json.Unmarshal(readConfig(t, name), &c))
	delete(c, "torch_dtype")
	delete(c, "dtype")
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return b
}

// vLLM never sizes the Mamba / linear-attention state in the KV cache's data type: with
// --mamba-cache-dtype and --mamba-ssm-cache-dtype auto (its defaults) the state takes the
// model's dtype (MambaStateDtypeCalculator, get_kv_cache_torch_dtype("auto",
// model_dtype)), and a config.json without torch_dtype is float32 to ModelConfig, which
// --dtype auto downcasts to bf16 on any GPU from compute capability 8.0. So without
// torch_dtype the state is bf16 (2 bytes a value) whatever --kv-cache-dtype is; before,
// fp8 KV made it fp8 and fp32 KV fp32.
func TestStateDTypeWithoutTorchDType(t *testing.T) {
	for _, fixture := range []string{"ai21-jamba-1.5-mini.json", "qwen3-next-80b-a3b-instruct.json"} {
		t.Run(fixture, func(t *testing.T) {
			with, err := ParseHFConfig(readConfig(t, fixture))
			require.NoError(t, err)
			require.Equal(t, BF16, with.DType, "the published config says bf16")
			m, err := ParseHFConfig(withoutDType(t, fixture))
			require.NoError(t, err)
			require.Zero(t, m.DType, "no torch_dtype")
			want := with.StateBytes(BF16) // Jamba 1.5 Mini: 28 x 311,296 (TestPlanCountsState)
			require.Positive(t, want)
			for _, kv := range []DType{FP8E4M3, NVFP4, FP16, BF16, FP32} {
				l, err := NewKVLayout(m, kv, 1, 16)
				require.NoError(t, err)
				assert.Equal(t, want, l.StateBytesPerRequest(), "kv %s: the state stays bf16", kv)
				lw, err := NewKVLayout(with, kv, 1, 16)
				require.NoError(t, err)
				assert.Equal(t, lw.BytesPerRequest(1000), l.BytesPerRequest(1000), "kv %s: as with torch_dtype bfloat16", kv)
				h, err := m.Hybrid(kv)
				require.NoError(t, err)
				hw, err := with.Hybrid(kv)
				require.NoError(t, err)
				assert.Equal(t, hw.Layers, h.Layers, "kv %s: the layout comparison's layers as with torch_dtype bfloat16", kv)
			}
		})
	}
}
