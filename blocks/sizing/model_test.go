package sizing

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// llamaSpec is a Llama-shaped model: layers full-attention layers of kvHeads heads of 128.
func llamaSpec(layers, heads, kvHeads int) ModelSpec {
	return ModelSpec{Name: "llama", AttentionHeads: heads, DType: BF16,
		Groups: []LayerGroup{{Layers: layers, KVHeads: kvHeads, KHeadDim: 128, VHeadDim: 128}}}
}

// The published figures of the issue: Llama 3 70B takes 327,680 bytes per token in fp16
// (80 layers, 8 KV heads, head dim 128), 32K tokens about 10 GiB and 128K about 40 GiB;
// Llama 3 8B 131,072 bytes; the 70B without GQA (64 KV heads) 2.5 MiB; fp8 halves each.
func TestPublishedKVFigures(t *testing.T) {
	tests := []struct {
		name        string
		spec        ModelSpec
		perToken    int64 // bytes, fp16
		at32K       int64 // bytes for 32,768 tokens, fp16
		at128K      int64 // bytes for 131,072 tokens, fp16
		description string
	}{
		{"llama-3-70b", llamaSpec(80, 64, 8), 327_680, 10 * gib, 40 * gib, "2 x 80 x 8 x 128 x 2"},
		{"llama-3-8b", llamaSpec(32, 32, 8), 131_072, 4 * gib, 16 * gib, "2 x 32 x 8 x 128 x 2"},
		{"llama-3-70b without GQA", llamaSpec(80, 64, 64), 5 * mib / 2, 80 * gib, 320 * gib, "2 x 80 x 64 x 128 x 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []struct {
				d   DType
				div int64
			}{{FP16, 1}, {BF16, 1}, {FP8E4M3, 2}, {FP8E5M2, 2}, {INT8, 2}, {FP32, 1}} {
				div := c.div
				mul := int64(1)
				if c.d == FP32 {
					mul = 2
				}
				b, err := tt.spec.KVBitsPerToken(c.d)
				require.NoError(t, err)
				n, whole := b.WholeBytes()
				require.True(t, whole)
				assert.Equal(t, tt.perToken*mul/div, n, "%s per token, %s", c.d, tt.description)

				l, err := NewKVLayout(tt.spec, c.d, 1, 16)
				require.NoError(t, err)
				assert.Equal(t, tt.at32K*mul/div, l.BytesPerRequest(32_768), "%s at 32K", c.d)
				assert.Equal(t, tt.at128K*mul/div, l.BytesPerRequest(131_072), "%s at 128K", c.d)
				assert.Equal(t, tt.at32K*mul/div, l.ModelBytesPerRequest(32_768))
			}
		})
	}
}

func TestLlama70BPresetMatchesPublishedFigure(t *testing.T) {
	m, err := ModelPreset("llama-3-70b")
	require.NoError(t, err)
	b, err := m.KVBitsPerToken(FP16)
	require.NoError(t, err)
	assert.Equal(t, Bits(327_680*8), b)
	b, err = m.KVBitsPerToken(FP8E4M3)
	require.NoError(t, err)
	assert.Equal(t, Bits(163_840*8), b)
}

func TestKVBitsPerTokenLayouts(t *testing.T) {
	tests := []struct {
		name  string
		spec  ModelSpec
		dtype DType
		bits  Bits
	}{
		{"K and V head dims differ", ModelSpec{Groups: []LayerGroup{{Layers: 10, KVHeads: 4, KHeadDim: 192, VHeadDim: 128}}}, FP16,
			Bits(10 * 4 * (192 + 128) * 16)},
		{"MLA: one latent, no K/V doubling", ModelSpec{Groups: []LayerGroup{{Layers: 61, LatentDim: 576}}}, BF16,
			Bits(61 * 576 * 16)}, // 70,272 bytes: DeepSeek-V3
		{"sliding window layers count in full per token", ModelSpec{Groups: []LayerGroup{
			{Layers: 52, Window: 1024, KVHeads: 16, KHeadDim: 128, VHeadDim: 128},
			{Layers: 10, KVHeads: 16, KHeadDim: 128, VHeadDim: 128}}}, BF16,
			Bits(62 * 16 * 256 * 16)},
		{"nvfp4: 4 bits a value and an fp8 scale per 16", ModelSpec{Groups: []LayerGroup{{Layers: 80, KVHeads: 8, KHeadDim: 128, VHeadDim: 128}}}, NVFP4,
			Bits(80 * 8 * 2 * (128*4 + 8*8))}, // 184,320 bytes: 0.5625 of fp16's 327,680
		{"mxfp4: 4 bits a value and an e8m0 scale per 32", ModelSpec{Groups: []LayerGroup{{Layers: 80, KVHeads: 8, KHeadDim: 128, VHeadDim: 128}}}, MXFP4,
			Bits(80 * 8 * 2 * (128*4 + 4*8))},
		{"fp4 on a head dim that is not a multiple of 16: a started block has a scale", ModelSpec{Groups: []LayerGroup{{Layers: 1, KVHeads: 1, KHeadDim: 20, VHeadDim: 20}}}, NVFP4,
			Bits(2 * (20*4 + 2*8))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.spec.KVBitsPerToken(tt.dtype)
			require.NoError(t, err)
			assert.Equal(t, tt.bits, b)
		})
	}
}

func TestFractionalBytesStayExact(t *testing.T) {
	// One layer, one head of dim 1 in nvfp4: 4 bits + an 8-bit scale, twice (K and V) =
	// 24 bits = 3 bytes; with dim 1 for K and 2 for V: 12 + 16 = 28 bits = 3.5 bytes.
	m := ModelSpec{Groups: []LayerGroup{{Layers: 1, KVHeads: 1, KHeadDim: 1, VHeadDim: 2}}, DType: BF16, MaxModelLen: 8}
	b, err := m.KVBitsPerToken(NVFP4)
	require.NoError(t, err)
	assert.Equal(t, Bits(28), b)
	n, whole := b.WholeBytes()
	assert.False(t, whole)
	assert.Equal(t, int64(3), n)
	assert.Equal(t, 3.5, b.Bytes())
	assert.Equal(t, int64(4), b.CeilBytes())
	assert.Equal(t, "3.5 B", b.String())
	// A block of 16 tokens is 448 bits, 56 whole bytes: nothing is lost by rounding a token.
	l, err := NewKVLayout(m, NVFP4, 1, 16)
	require.NoError(t, err)
	assert.Equal(t, int64(56), l.BytesPerBlock())
	// A block of 1 token rounds up to whole bytes.
	l, err = NewKVLayout(m, NVFP4, 1, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(4), l.BytesPerBlock())
}

func TestTensorParallelHeads(t *testing.T) {
	tests := []struct {
		name    string
		spec    ModelSpec
		tp      int
		perGPU  Bits
		wantErr bool
	}{
		{"8 KV heads over 2 GPUs: 4 each", llamaSpec(80, 64, 8), 2, Bits(80 * 4 * 256 * 16), false},
		{"8 KV heads over 8 GPUs: 1 each", llamaSpec(80, 64, 8), 8, Bits(80 * 1 * 256 * 16), false},
		{"8 KV heads over 16 GPUs: replicated, 1 each", llamaSpec(126, 128, 8), 16, Bits(126 * 1 * 256 * 16), false},
		{"MQA over 4 GPUs: the one head replicated", llamaSpec(10, 32, 1), 4, Bits(10 * 256 * 16), false},
		{"MLA latent replicated on every GPU", ModelSpec{AttentionHeads: 128, Groups: []LayerGroup{{Layers: 61, LatentDim: 576}}}, 8, Bits(61 * 576 * 16), false},
		{"TP must divide the attention heads", llamaSpec(80, 64, 8), 3, 0, true},
		{"TP must divide the KV heads", ModelSpec{AttentionHeads: 24, Groups: []LayerGroup{{Layers: 2, KVHeads: 6, KHeadDim: 64, VHeadDim: 64}}}, 4, 0, true},
		{"TP must be a multiple of fewer KV heads", ModelSpec{AttentionHeads: 48, Groups: []LayerGroup{{Layers: 2, KVHeads: 4, KHeadDim: 64, VHeadDim: 64}}}, 6, 0, true},
		{"TP zero", llamaSpec(80, 64, 8), 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewKVLayout(tt.spec, FP16, tt.tp, 16)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrInvalidArgument)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.perGPU, l.BitsPerTokenPerGPU())
			whole, err := tt.spec.KVBitsPerToken(FP16)
			require.NoError(t, err)
			assert.Equal(t, whole, l.BitsPerToken(), "the whole-model figure ignores tensor parallelism")
			assert.Equal(t, int64(16)*int64(tt.perGPU)/8, l.BytesPerBlock())
		})
	}
}

func TestSlidingWindowHoldsWindowPlusOneBlock(t *testing.T) {
	perLayer := int64(8 * 256 * 2) // bytes per token per layer, fp16: 8 heads x (128 + 128) x 2
	m := ModelSpec{Groups: []LayerGroup{
		{Layers: 1, Window: 4096, KVHeads: 8, KHeadDim: 128, VHeadDim: 128},
		{Layers: 1, KVHeads: 8, KHeadDim: 128, VHeadDim: 128},
	}}
	l, err := NewKVLayout(m, FP16, 1, 16)
	require.NoError(t, err)
	tests := []struct {
		tokens        int64
		slidingTokens int64 // tokens the sliding layer holds, in whole blocks
		fullTokens    int64
	}{
		{1, 16, 16},
		{16, 16, 16},
		{17, 32, 32},
		{4096, 4096, 4096},
		{4097, 4112, 4112}, // 257 blocks: the window's 256 plus one
		{4113, 4112, 4128},
		{131072, 4112, 131072},
	}
	for _, tt := range tests {
		assert.Equal(t, (tt.slidingTokens+tt.fullTokens)*perLayer, l.BytesPerRequest(tt.tokens), "tokens %d", tt.tokens)
	}
	assert.Zero(t, l.BytesPerRequest(0))
	assert.Zero(t, l.BytesPerRequest(-5))
}

func TestMaxContextIsTheBoundary(t *testing.T) {
	tests := []struct {
		name   string
		spec   ModelSpec
		budget int64
	}{
		{"llama 70B, 10 GiB", llamaSpec(80, 64, 8), 10 * gib},
		{"llama 70B, one block short of 10 GiB", llamaSpec(80, 64, 8), 10*gib - 1},
		{"gemma-like hybrid", ModelSpec{Groups: []LayerGroup{
			{Layers: 52, Window: 1024, KVHeads: 16, KHeadDim: 128, VHeadDim: 128},
			{Layers: 10, KVHeads: 16, KHeadDim: 128, VHeadDim: 128}}}, 7 * gib},
		{"less than a block", llamaSpec(80, 64, 8), 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewKVLayout(tt.spec, FP16, 1, 16)
			require.NoError(t, err)
			n, unbounded := l.MaxContext(tt.budget)
			require.False(t, unbounded)
			if n > 0 {
				assert.LessOrEqual(t, l.BytesPerRequest(n), tt.budget)
			}
			assert.Greater(t, l.BytesPerRequest(n+1), tt.budget)
		})
	}
	l, err := NewKVLayout(llamaSpec(80, 64, 8), FP16, 1, 16)
	require.NoError(t, err)
	n, _ := l.MaxContext(10 * gib)
	assert.Equal(t, int64(32_768), n, "10 GiB holds exactly 32K tokens of Llama 3 70B in fp16")
	n, _ = l.MaxContext(0)
	assert.Zero(t, n)
}

func TestMaxContextUnboundedWhenEveryLayerSlides(t *testing.T) {
	m := ModelSpec{Groups: []LayerGroup{{Layers: 32, Window: 4096, KVHeads: 8, KHeadDim: 128, VHeadDim: 128}}}
	l, err := NewKVLayout(m, BF16, 1, 16)
	require.NoError(t, err)
	n, unbounded := l.MaxContext(1 * gib)
	assert.True(t, unbounded)
	assert.Equal(t, int64(MaxTokens), n)
	// Below one window's worth, it is bounded like any model.
	n, unbounded = l.MaxContext(100 * mib)
	assert.False(t, unbounded)
	assert.Equal(t, int64(800), n) // 100 MiB / 128 KiB per token = 800 tokens
}

func TestMaxConcurrency(t *testing.T) {
	l, err := NewKVLayout(llamaSpec(80, 64, 8), FP16, 1, 16)
	require.NoError(t, err)
	assert.Equal(t, int64(4), l.MaxConcurrency(40*gib, 32_768))
	assert.Equal(t, int64(3), l.MaxConcurrency(40*gib-1, 32_768))
	// A request of 17 tokens takes two blocks.
	assert.Equal(t, int64(10), l.MaxConcurrency(20*l.BytesPerBlock(), 17))
	assert.Zero(t, l.MaxConcurrency(0, 16))
	assert.Zero(t, l.MaxConcurrency(gib, 0))
}

func TestModelSpecValidate(t *testing.T) {
	good := LayerGroup{Layers: 2, KVHeads: 2, KHeadDim: 64, VHeadDim: 64}
	tests := []struct {
		name string
		spec ModelSpec
	}{
		{"no groups", ModelSpec{}},
		{"zero layers", ModelSpec{Groups: []LayerGroup{{KVHeads: 2, KHeadDim: 64, VHeadDim: 64}}}},
		{"zero heads", ModelSpec{Groups: []LayerGroup{{Layers: 2, KHeadDim: 64, VHeadDim: 64}}}},
		{"zero V dim", ModelSpec{Groups: []LayerGroup{{Layers: 2, KVHeads: 2, KHeadDim: 64}}}},
		{"MLA with heads", ModelSpec{Groups: []LayerGroup{{Layers: 2, KVHeads: 2, LatentDim: 576}}}},
		{"negative window", ModelSpec{Groups: []LayerGroup{{Layers: 2, Window: -1, KVHeads: 2, KHeadDim: 64, VHeadDim: 64}}}},
		{"negative params", ModelSpec{Groups: []LayerGroup{good}, Params: -1}},
		{"absurd size", ModelSpec{Groups: []LayerGroup{{Layers: 1 << 20, KVHeads: 1 << 20, KHeadDim: 1 << 20, VHeadDim: 1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorIs(t, tt.spec.Validate(), ErrInvalidArgument)
			_, err := tt.spec.KVBitsPerToken(FP16)
			assert.ErrorIs(t, err, ErrInvalidArgument)
		})
	}
	assert.NoError(t, ModelSpec{Groups: []LayerGroup{good}}.Validate())
}

func TestTotalWeightBytes(t *testing.T) {
	m := llamaSpec(80, 64, 8)
	m.Params = 70_553_706_496
	w, err := m.TotalWeightBytes()
	require.NoError(t, err)
	assert.Equal(t, int64(141_107_412_992), w, "bf16: two bytes a parameter")
	m.WeightDType = FP8E4M3
	w, err = m.TotalWeightBytes()
	require.NoError(t, err)
	assert.Equal(t, int64(70_553_706_496), w)
	m.WeightDType = MXFP4
	w, err = m.TotalWeightBytes()
	require.NoError(t, err)
	assert.Equal(t, (int64(70_553_706_496)*17+31)/32, w, "4.25 bits a parameter")
	m.WeightBytes = 5
	w, err = m.TotalWeightBytes()
	require.NoError(t, err)
	assert.Equal(t, int64(5), w, "a given size wins")

	_, err = llamaSpec(1, 1, 1).TotalWeightBytes()
	assert.ErrorIs(t, err, ErrMissingField)
	w, err = ModelSpec{Params: 10}.TotalWeightBytes()
	require.NoError(t, err)
	assert.Equal(t, int64(20), w, "no torch_dtype: vLLM's float32 default, run in bf16")
	w, err = ModelSpec{Params: 10, DType: FP32}.TotalWeightBytes()
	require.NoError(t, err)
	assert.Equal(t, int64(20), w, "float32 weights load in bf16 under --dtype auto")
}

func TestDTypes(t *testing.T) {
	tests := []struct {
		in       string
		want     DType
		bits128  int64
		perValue float64
	}{
		{"fp32", FP32, 4096, 32},
		{"float16", FP16, 2048, 16},
		{"half", FP16, 2048, 16},
		{"BF16", BF16, 2048, 16},
		{"bfloat16", BF16, 2048, 16},
		{"fp8", FP8E4M3, 1024, 8},
		{"fp8_e4m3", FP8E4M3, 1024, 8},
		{"float8_e4m3fn", FP8E4M3, 1024, 8},
		{"fp8_e5m2", FP8E5M2, 1024, 8},
		{"int8", INT8, 1024, 8},
		{"fp4", NVFP4, 576, 4.5},
		{"nvfp4", NVFP4, 576, 4.5},
		{"mxfp4", MXFP4, 544, 4.25},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, err := ParseDType(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, d)
			assert.Equal(t, tt.bits128, d.VectorBits(128))
			assert.Equal(t, tt.perValue, d.BitsPerValue())
			back, err := ParseDType(d.String())
			require.NoError(t, err)
			assert.Equal(t, d, back, "String round-trips")
		})
	}
	_, err := ParseDType("fp9")
	assert.ErrorIs(t, err, ErrUnknownDType)
	assert.Contains(t, err.Error(), "fp")
	assert.Equal(t, "invalid", DType(0).String())
	assert.Zero(t, DType(0).VectorBits(8))
	assert.Len(t, DTypeNames(), 8)
}
