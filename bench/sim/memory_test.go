package sim

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvpage/kvpage/blocks/sizing"
)

// defaultPlan sizes the default comparison's memory: Llama 3 8B (bf16, 131,072 bytes per
// token) on an 80 GB H100 at vLLM's defaults.
func defaultPlan(t testing.TB, maxModelLen int) sizing.Plan {
	m, err := sizing.ModelPreset("llama-3-8b")
	require.NoError(t, err)
	g, err := sizing.GPUPreset("h100-80gb")
	require.NoError(t, err)
	p, err := sizing.NewPlan(sizing.PlanConfig{Model: m, GPU: g, RuntimeOverhead: sizing.DefaultRuntimeOverhead, MaxModelLen: maxModelLen})
	require.NoError(t, err)
	return p
}

func TestTokenBudget(t *testing.T) {
	p := defaultPlan(t, DefaultMaxModelLen)
	n, err := TokenBudget(p)
	require.NoError(t, err)
	assert.Equal(t, p.KVBudget/131072, int64(n), "KV bytes / bytes per token")
	assert.Equal(t, 448308, n, "the default comparison's budget (bench/README.md)")

	tiny, err := sizing.GPUPreset("rtx-4090")
	require.NoError(t, err)
	p.Config.GPU = tiny
	m, err := sizing.ModelPreset("llama-3-70b")
	require.NoError(t, err)
	none, err := sizing.NewPlan(sizing.PlanConfig{Model: m, GPU: tiny, RuntimeOverhead: sizing.DefaultRuntimeOverhead, MaxModelLen: 2048})
	require.NoError(t, err)
	_, err = TokenBudget(none)
	assert.ErrorIs(t, err, ErrInvalidConfig, "a 70B model does not fit a 24 GB GPU")
	assert.ErrorIs(t, err, sizing.ErrDoesNotFit)
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig(10000)
	require.NoError(t, ok.Validate())
	for name, mut := range map[string]func(*Config){
		"capacity below one request": func(c *Config) { c.Capacity = c.MaxModelLen - 1 },
		"max model len 1":            func(c *Config) { c.MaxModelLen = 1 },
		"no seqs":                    func(c *Config) { c.MaxNumSeqs = 0 },
		"budget below max model len": func(c *Config) { c.MaxNumBatchedTokens = c.MaxModelLen - 1 },
		"budget below max num seqs":  func(c *Config) { c.MaxNumSeqs = c.MaxNumBatchedTokens + 1 },
		"step duration zero":         func(c *Config) { c.StepDuration = 0 },
	} {
		c := ok
		mut(&c)
		assert.ErrorIs(t, c.Validate(), ErrInvalidConfig, name)
	}
	reqs := tinyRequests()
	cfg := tinyConfig(10, 8)
	for name, s := range map[string]Scheme{
		"unknown scheme":            {Name: "vllm"},
		"no scheme":                 {},
		"block size on orca":        {Name: OrcaMax, BlockSize: 16},
		"zero block size":           {Name: Paged},
		"blocks too big for budget": {Name: Paged, BlockSize: 4},
		"watermark of 1":            {Name: Paged, BlockSize: 1, Watermark: 1},
		"unknown eviction":          {Name: Paged, BlockSize: 1, PrefixSharing: true, Eviction: "random"},
		"unknown preemption":        {Name: Paged, BlockSize: 1, Preemption: "oldest"},
	} {
		_, err := Simulate(reqs, cfg, s)
		assert.ErrorIs(t, err, ErrInvalidConfig, name)
	}
	bad := tinyRequests()
	bad[1].Output = 9 // prompt + output beyond max-model-len 8: not prepared
	_, err := Simulate(bad, cfg, Scheme{Name: OrcaMax})
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

func TestParseSchemeNameAndLabels(t *testing.T) {
	assert.Equal(t, []string{OrcaMax, OrcaPow2, OrcaOracle, Paged, Hybrid}, SchemeNames())
	for _, k := range SchemeNames() {
		got, err := ParseSchemeName(" " + strings.ToUpper(k))
		require.NoError(t, err)
		assert.Equal(t, k, got)
	}
	_, err := ParseSchemeName("vllm")
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Equal(t, "paged/16+s3fifo preempt=cost wm=0.01", Scheme{Name: Paged, BlockSize: 16, PrefixSharing: true, Eviction: "s3fifo", Preemption: "cost", Watermark: 0.01}.Label())
	assert.Equal(t, "orca-pow2", Scheme{Name: OrcaPow2}.Label())
}
