package sizing

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The layout arithmetic on the published configs: vLLM's uniform pages raise attention's
// block to hold a state on Mamba hybrids and pad Gemma 3's groups; the other layouts keep
// 16-token blocks.
func TestCompareLayouts(t *testing.T) {
	byName := map[string]HybridModel{}
	for _, m := range HybridPresets() {
		byName[m.Name] = m
	}
	const gib = int64(1) << 30
	rows, err := CompareLayouts(byName["jamba-1.5-mini"], 8192, 8192, 40*gib)
	require.NoError(t, err)
	// 311,296-byte Mamba state over 4,096 bytes a token: 76 tokens, aligned up to 80.
	require.Equal(t, 80, rows[0].BlockTokens)
	require.Equal(t, 16, rows[1].BlockTokens)
	rows, err = CompareLayouts(byName["qwen3-next-80b-a3b"], 8192, 8192, 40*gib)
	require.NoError(t, err)
	// 1,097,728-byte DeltaNet state over 2,048 bytes a token: 536, aligned up to 544.
	require.Equal(t, 544, rows[0].BlockTokens)
	rows, err = CompareLayouts(byName["gemma-3-27b"], 8192, 8192, 40*gib)
	require.NoError(t, err)
	// 52 sliding layers in groups of 10: 6 groups, 8 padding slots.
	require.Equal(t, 8, rows[0].PaddingLayers)
	require.Greater(t, rows[0].RequestBytes, rows[2].RequestBytes)
	rows, err = CompareLayouts(byName["gpt-oss-120b"], 8192, 8192, 40*gib)
	require.NoError(t, err)
	require.Zero(t, rows[0].PaddingLayers)
	require.Equal(t, rows[0].RequestBytes, rows[2].RequestBytes, "no state, no padding: the layouts agree")
	// At the planning context the per-class pools hold what carved pages hold (within
	// rounding); at another length the split leaves one pool short.
	for _, m := range HybridPresets() {
		at, err := CompareLayouts(m, 8192, 8192, 40*gib)
		require.NoError(t, err)
		require.InDelta(t, at[2].Concurrency, at[1].Concurrency, 1, m.Name)
		off, err := CompareLayouts(m, 65536, 8192, 40*gib)
		require.NoError(t, err)
		require.LessOrEqual(t, off[1].Concurrency, off[2].Concurrency, m.Name)
		for _, r := range off {
			require.GreaterOrEqual(t, r.RequestBytes, r.UsefulBytes, "%s %s", m.Name, r.Layout)
		}
	}
	_, err = CompareLayouts(HybridModel{Name: "x"}, 1, 1, 1)
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// The hybrid presets come from models.json through the config parser; each equals what
// the parser makes of the model's published config.json in testdata, and the per-layer
// figures the last session derived by hand from the same configs.
func TestHybridPresetsFromConfigs(t *testing.T) {
	attn := func(kv, dim int) int64 { return 2 * int64(kv) * int64(dim) * 2 }
	tests := []struct {
		preset, fixture string
		layers          []HybridLayers
	}{
		{"gpt-oss-20b", "gpt-oss-20b.json", []HybridLayers{
			{Kind: KindSliding, Layers: 12, Span: 128, TokenBytes: attn(8, 64)}, {Kind: KindFull, Layers: 12, TokenBytes: attn(8, 64)}}},
		{"gpt-oss-120b", "", []HybridLayers{
			{Kind: KindSliding, Layers: 18, Span: 128, TokenBytes: attn(8, 64)}, {Kind: KindFull, Layers: 18, TokenBytes: attn(8, 64)}}},
		{"gemma-3-27b", "gemma-3-27b-it.json", []HybridLayers{
			{Kind: KindSliding, Layers: 52, Span: 1024, TokenBytes: attn(16, 128)}, {Kind: KindFull, Layers: 10, TokenBytes: attn(16, 128)}}},
		{"llama-4-scout", "llama-4-scout-17b-16e-instruct.json", []HybridLayers{
			{Kind: KindChunked, Layers: 36, Span: 8192, TokenBytes: attn(8, 128)}, {Kind: KindFull, Layers: 12, TokenBytes: attn(8, 128)}}},
		// Gated DeltaNet: conv (4-1) x (2 x 16 x 128 + 32 x 128) + recurrent 32 x 128 x 128, bf16.
		{"qwen3-next-80b-a3b", "qwen3-next-80b-a3b-instruct.json", []HybridLayers{
			{Kind: KindState, Layers: 36, StateBytes: 1_097_728}, {Kind: KindFull, Layers: 12, TokenBytes: attn(2, 256)}}},
		// Mamba: d_inner 2 x 4,096; conv (4-1) x 8,192 + SSM 8,192 x 16, bf16.
		{"jamba-1.5-mini", "ai21-jamba-1.5-mini.json", []HybridLayers{
			{Kind: KindState, Layers: 28, StateBytes: 311_296}, {Kind: KindFull, Layers: 4, TokenBytes: attn(8, 128)}}},
	}
	presets := HybridPresets()
	require.Len(t, presets, len(tests))
	byName := map[string]HybridModel{}
	for _, m := range presets {
		byName[m.Name] = m
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			p, ok := byName[tt.preset]
			require.True(t, ok)
			assert.Equal(t, tt.layers, p.Layers)
			if tt.fixture == "" {
				return
			}
			m, err := ParseHFConfig(readConfig(t, tt.fixture))
			require.NoError(t, err)
			h, err := m.Hybrid(BF16)
			require.NoError(t, err)
			assert.Equal(t, p.Layers, h.Layers, "the published config.json gives the preset's numbers")
		})
	}
}

// A state group's memory is in the plan: one state per request, whatever its length.
func TestPlanCountsState(t *testing.T) {
	m, err := ModelPreset("jamba-1.5-mini")
	require.NoError(t, err)
	l, err := NewKVLayout(m, BF16, 1, 16)
	require.NoError(t, err)
	state := int64(28 * 311_296)
	assert.Equal(t, state, l.StateBytesPerRequest())
	assert.Equal(t, state, m.StateBytes(BF16))
	assert.Equal(t, state+16*16_384, l.BytesPerRequest(16))
	assert.Equal(t, state+2*16*16_384, l.BytesPerRequest(17))
	l2, err := NewKVLayout(m, BF16, 2, 16)
	require.NoError(t, err)
	assert.Equal(t, state/2, l2.StateBytesPerRequest(), "tensor parallelism splits the state")
	// fp8 KV leaves the state in the model's bf16, as vLLM's mamba_cache_dtype auto.
	l8, err := NewKVLayout(m, FP8E4M3, 1, 16)
	require.NoError(t, err)
	assert.Equal(t, state+16*8_192, l8.BytesPerRequest(16))
}

// TestHybridLayoutTable prints the comparison bench/README.md shows.
func TestHybridLayoutTable(t *testing.T) {
	table, err := LayoutTable(HybridPresets(), []int64{2048, 32768}, 8192, 40<<30)
	require.NoError(t, err)
	t.Log("\n" + table)
}

// HybridOnGPU is one GPU's shard, as NewKVLayout lays the model out: Qwen3-Next's two KV
// heads are divided at -tp 2 and replicated at -tp 4 and 8 (one head a GPU), its Gated
// DeltaNet state split tp ways; tp 1 is Hybrid's whole model; a tp that does not divide
// the 16 attention heads is refused.
func TestHybridOnGPU(t *testing.T) {
	m, err := ModelPreset("qwen3-next-80b-a3b")
	require.NoError(t, err)
	whole, err := m.Hybrid(BF16)
	require.NoError(t, err)
	one, err := m.HybridOnGPU(BF16, 1)
	require.NoError(t, err)
	require.Equal(t, whole, one)
	kinds := func(h HybridModel) (attn, state int64) {
		for _, l := range h.Layers {
			attn += int64(l.Layers) * l.TokenBytes
			state += int64(l.Layers) * l.StateBytes
		}
		return attn, state
	}
	attn, state := kinds(whole)
	require.Equal(t, int64(12*2*2*256*2), attn, "12 layers, 2 KV heads, K and V of 256 bf16")
	for _, tc := range []struct {
		tp          int
		attn, state int64
	}{{2, attn / 2, state / 2}, {4, attn / 2, state / 4}, {8, attn / 2, state / 8}} {
		h, err := m.HybridOnGPU(BF16, tc.tp)
		require.NoError(t, err)
		a, s := kinds(h)
		require.Equal(t, tc.attn, a, "tp %d", tc.tp)
		require.Equal(t, tc.state, s, "tp %d", tc.tp)
		l, err := NewKVLayout(m, BF16, tc.tp, 16)
		require.NoError(t, err)
		require.Equal(t, l.BitsPerTokenPerGPU().CeilBytes(), a, "tp %d: the paged rows' bytes per token", tc.tp)
		require.Equal(t, l.StateBytesPerRequest(), s, "tp %d", tc.tp)
	}
	_, err = m.HybridOnGPU(BF16, 3)
	require.ErrorIs(t, err, ErrInvalidArgument)
}
