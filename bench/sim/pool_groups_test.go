package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks/sizing"
)

// checkPoolGroups is an invariant, not a refusal: every embedded hybrid preset, in every
// layout, KV data type, block size and tensor-parallel size the scheme accepts, builds
// pools of at most maxPoolGroups groups (the carved pool by carveUnit's cap, the others
// by the presets' layer counts). A new preset that broke it fails here.
func TestPoolGroupsOfEveryPreset(t *testing.T) {
	most := map[string]int{}
	checked := 0
	for _, h := range sizing.HybridPresets() {
		for _, layout := range HybridLayouts {
			for d := sizing.FP32; d.Valid(); d++ {
				for _, tp := range []int{1, 2, 4, 8} {
					for _, bs := range []int{1, 16, 256} {
						cfg := DefaultConfig(100000)
						cfg.TensorParallel = tp
						s := Scheme{Name: Hybrid, Model: h.Name, Layout: layout, BlockSize: bs, PrefixSharing: true, KVCacheDType: d}
						if s.Validate(&cfg) != nil {
							continue // tp not dividing the heads, or a pool too small
						}
						a, err := newHybridAlloc(&cfg, s, nil, true)
						require.NoError(t, err)
						for _, p := range a.pools {
							require.LessOrEqual(t, len(p.kinds), maxPoolGroups, "%s %s %s tp %d block %d", h.Name, layout, d, tp, bs)
							most[layout] = max(most[layout], len(p.kinds))
						}
						checked++
					}
				}
			}
		}
	}
	require.Positive(t, checked)
	assert.LessOrEqual(t, most[LayoutUniform], 8, "the uniform layout's groups: ceil(layers / GroupLayers) a kind")
	assert.LessOrEqual(t, most[LayoutPerClass], 2, "a pool per page size: a group per kind")
	assert.Greater(t, most[LayoutCarved], 200, "the carved pool reaches near the cap (Qwen3-Next in fp4)")
	t.Logf("%d configurations; most groups in one pool: %v", checked, most)
}

func TestCheckPoolGroupsPanicsPastTheLimit(t *testing.T) {
	s := Scheme{Name: Hybrid, Model: "qwen3-next-80b-a3b", Layout: LayoutCarved}
	assert.NotPanics(t, func() { checkPoolGroups(s, maxPoolGroups) })
	assert.PanicsWithValue(t, "sim: qwen3-next-80b-a3b carved: a pool of 256 KV-cache groups, above the hybrid Manager's 255",
		func() { checkPoolGroups(s, maxPoolGroups+1) })
}
