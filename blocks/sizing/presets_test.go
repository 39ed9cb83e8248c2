package sizing

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The KV bytes per token of every preset in bf16, by the formula from its published
// config: 2 x layers x KV heads x head dim x 2 bytes (one latent for MLA).
func TestModelPresets(t *testing.T) {
	tests := []struct {
		name          string
		bytesPerToken int64
		layers        int
		slidingLayers int
		window        int
		maxModelLen   int
		params        int64
	}{
		{"llama-3.1-8b", 131_072, 32, 0, 0, 131072, 8_030_261_248},
		{"llama-3.1-70b", 327_680, 80, 0, 0, 131072, 70_553_706_496},
		{"llama-3.1-405b", 516_096, 126, 0, 0, 131072, 405_853_388_800},
		{"llama-3-8b", 131_072, 32, 0, 0, 8192, 8_030_261_248},
		{"llama-3-70b", 327_680, 80, 0, 0, 8192, 70_553_706_496},
		{"mistral-7b", 131_072, 32, 32, 4096, 32768, 7_241_732_096},
		{"mixtral-8x7b", 131_072, 32, 0, 0, 32768, 46_702_792_704},
		{"qwen2.5-7b", 57_344, 28, 0, 0, 32768, 7_615_616_512},
		{"qwen2.5-72b", 327_680, 80, 0, 0, 32768, 72_706_203_648},
		{"qwen3-32b", 262_144, 64, 0, 0, 40960, 32_762_123_264},
		{"gemma-2-9b", 344_064, 42, 21, 4096, 8192, 9_241_705_984},
		{"gemma-2-27b", 376_832, 46, 23, 4096, 8192, 27_227_128_320},
		{"gemma-3-27b", 507_904, 62, 52, 1024, 131072, 27_432_406_640},
		{"deepseek-v3", 70_272, 61, 0, 0, 163840, 671_026_419_200},
		{"gpt-oss-20b", 49_152, 24, 12, 128, 131072, 20_914_757_184},
		{"gpt-oss-120b", 73_728, 36, 18, 128, 131072, 116_829_156_672},
		{"llama-4-scout", 196_608, 48, 36, 8192, 10485760, 109_000_000_000},
		// State layers hold no tokens: bytes per token count the attention layers.
		{"qwen3-next-80b-a3b", 24_576, 48, 0, 0, 262144, 80_000_000_000},
		{"jamba-1.5-mini", 16_384, 32, 0, 0, 262144, 52_000_000_000},
	}
	names := ModelPresetNames()
	require.Len(t, names, len(tests), "every preset is pinned here")
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.name, names[i])
			m, err := ModelPreset(tt.name)
			require.NoError(t, err)
			require.NoError(t, m.Validate())
			b, err := m.KVBitsPerToken(BF16)
			require.NoError(t, err)
			assert.Equal(t, Bits(tt.bytesPerToken*8), b)
			assert.Equal(t, tt.layers, m.NumLayers())
			sliding := 0
			for _, g := range m.Groups {
				if g.Sliding() {
					sliding += g.Layers
					assert.Equal(t, tt.window, g.Window)
				}
			}
			assert.Equal(t, tt.slidingLayers, sliding)
			assert.Equal(t, tt.maxModelLen, m.MaxModelLen)
			assert.Equal(t, tt.params, m.Params)
			assert.Equal(t, BF16, m.DType)
			assert.NotEmpty(t, m.Source, "every preset says where its values come from")
			w, err := m.TotalWeightBytes()
			require.NoError(t, err)
			assert.Positive(t, w)
		})
	}
}

func TestPresetWeights(t *testing.T) {
	tests := []struct {
		name  string
		bytes int64
	}{
		{"llama-3.1-70b", 2 * 70_553_706_496},
		{"deepseek-v3", 671_026_419_200}, // fp8 checkpoint: one byte a parameter
		{"gpt-oss-120b", 65_283_502_899}, // the model card's 60.8 GiB checkpoint
	}
	for _, tt := range tests {
		m, err := ModelPreset(tt.name)
		require.NoError(t, err)
		w, err := m.TotalWeightBytes()
		require.NoError(t, err)
		assert.Equal(t, tt.bytes, w, tt.name)
	}
	m, err := ModelPreset("gpt-oss-120b")
	require.NoError(t, err)
	for _, n := range m.Notes {
		assert.NotContains(t, n, weightsNote, "a given weight size makes the mxfp4 estimate moot")
	}
}

func TestModelPresetLookup(t *testing.T) {
	for _, name := range []string{"llama-3.1-70b", "Llama-3.1-70B", "llama_3.1_70b", " llama-3.1-70b ", "meta-llama/Llama-3.1-70B-Instruct", "llama-3.3-70b"} {
		m, err := ModelPreset(name)
		require.NoError(t, err, name)
		assert.Equal(t, "llama-3.1-70b", m.Name)
	}
	// A returned spec is a copy: changing it does not change the preset.
	m, err := ModelPreset("gemma-3-27b")
	require.NoError(t, err)
	m.Groups[0].Layers = 1
	again, err := ModelPreset("gemma-3-27b")
	require.NoError(t, err)
	assert.NotEqual(t, 1, again.Groups[0].Layers)
}

func TestUnknownModelListsClosestPresets(t *testing.T) {
	tests := []struct {
		name    string
		closest []string
	}{
		{"llama-3.1-7b", []string{"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b"}},
		{"llama-70b", []string{"llama-3-70b", "llama-3.1-70b", "llama-3-8b"}},
		{"gemma3-12b", []string{"gemma-3-27b", "gemma-2-9b", "gemma-2-27b"}},
		{"qwen3-30b", []string{"qwen3-32b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ModelPreset(tt.name)
			require.ErrorIs(t, err, ErrUnknownModel)
			var ue *UnknownNameError
			require.ErrorAs(t, err, &ue)
			assert.Len(t, ue.Closest, 3)
			assert.Subset(t, ue.Closest, tt.closest[:1], "the nearest preset comes first")
			assert.Equal(t, tt.closest[0], ue.Closest[0])
			assert.Contains(t, err.Error(), tt.closest[0])
		})
	}
}

// The memory nvidia-smi reports for each GPU (Memory-Usage total), from public logs, and
// its compute capability (NVIDIA's table; vLLM's major x 10 + minor).
func TestGPUPresets(t *testing.T) {
	tests := []struct {
		name string
		mib  int64
		cc   int
	}{
		{"a100-40gb", 40960, 80},
		{"a100-80gb", 81920, 80},
		{"h100-80gb", 81559, 90},
		{"h200", 143771, 90},
		{"b200", 183359, 100},
		{"l40s", 46068, 89},
		{"rtx-4090", 24564, 89},
		{"v100-16gb", 16384, 70},
		{"v100-32gb", 32768, 70},
		{"t4", 15360, 75},
	}
	require.Equal(t, len(tests), len(GPUPresetNames()))
	for _, tt := range tests {
		g, err := GPUPreset(tt.name)
		require.NoError(t, err)
		assert.Equal(t, tt.mib, g.MemoryMiB, tt.name)
		assert.Equal(t, tt.cc, g.ComputeCapability, tt.name)
		assert.Equal(t, tt.mib<<20, g.MemoryBytes())
		assert.NotEmpty(t, g.NvidiaSMIName)
	}
	g, err := GPUPreset("H100")
	require.NoError(t, err)
	assert.Equal(t, "h100-80gb", g.Name)
	_, err = GPUPreset("h1000")
	require.ErrorIs(t, err, ErrUnknownGPU)
	var ue *UnknownNameError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, "h100-80gb", ue.Closest[0])
}

func TestEditDistance(t *testing.T) {
	assert.Equal(t, 0, editDistance("", ""))
	assert.Equal(t, 3, editDistance("", "abc"))
	assert.Equal(t, 3, editDistance("kitten", "sitting"))
	assert.Equal(t, 1, editDistance("llama-70b", "llama3-70b"))
}
