package sizing

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func presetPlan(t *testing.T, model, gpu string, c PlanConfig) Plan {
	t.Helper()
	m, err := ModelPreset(model)
	require.NoError(t, err)
	g, err := GPUPreset(gpu)
	require.NoError(t, err)
	c.Model, c.GPU = m, g
	p, err := NewPlan(c)
	require.NoError(t, err)
	return p
}

// Llama 3.1 70B on four H100s with an fp8 cache at 32K, worked by hand:
// usable = floor(81,559 MiB x 0.9) = 76,968,728,985 B; weights 2 x 70,553,706,496 / 4 =
// 35,276,853,248 B per GPU; overhead 2 GiB; budget 39,544,392,089 B; a token per GPU is
// 80 layers x 2 heads x 256 values x 1 B = 40,960 B; a block 655,360 B; 60,339 blocks;
// a 32,768-token request is 2,048 blocks, so 29 fit.
func TestNewPlanWorkedExample(t *testing.T) {
	p := presetPlan(t, "llama-3.1-70b", "h100-80gb", PlanConfig{TensorParallel: 4, CacheDType: FP8E4M3, MaxModelLen: 32768, RuntimeOverhead: DefaultRuntimeOverhead})
	assert.Equal(t, int64(85_520_809_984), p.GPUMemory)
	assert.Equal(t, int64(76_968_728_985), p.UsableMemory)
	assert.Equal(t, int64(141_107_412_992), p.WeightsTotal)
	assert.Equal(t, int64(35_276_853_248), p.WeightsPerGPU)
	assert.Equal(t, int64(39_544_392_089), p.KVBudget)
	assert.Equal(t, Bits(163_840*8), p.BytesPerToken)
	assert.Equal(t, Bits(40_960*8), p.BytesPerTokenPerGPU)
	assert.Equal(t, int64(655_360), p.BytesPerBlock)
	assert.Equal(t, int64(60_339), p.NumBlocks)
	assert.Equal(t, int64(965_424), p.KVCacheTokens)
	assert.Equal(t, int64(1_342_177_280), p.BytesPerRequest)
	assert.Equal(t, int64(5*gib), p.ModelBytesPerRequest)
	assert.Equal(t, int64(29), p.MaxConcurrency)
	assert.InDelta(t, 29.46, p.ConcurrencyRatio, 0.01)
	assert.Equal(t, "kv-cache", p.Limit)
	assert.Equal(t, int64(965_424), p.MaxContext)
	assert.True(t, p.Fits())
	assert.NoError(t, p.Err())
	// Defaults filled in.
	assert.Equal(t, DefaultBlockSize, p.Config.BlockSize)
	assert.Equal(t, DefaultGPUMemoryUtilization, p.Config.GPUMemoryUtilization)
}

func TestNewPlanDefaults(t *testing.T) {
	p := presetPlan(t, "llama-3.1-8b", "h100-80gb", PlanConfig{})
	assert.Equal(t, 1, p.Config.TensorParallel)
	assert.Equal(t, BF16, p.Config.CacheDType, "auto: the model's dtype")
	assert.Equal(t, 131072, p.Config.MaxModelLen, "the model's max_position_embeddings, as vLLM defaults")
	assert.Equal(t, int64(16<<30), p.ModelBytesPerRequest)
	assert.Zero(t, p.Config.RuntimeOverhead, "zero overhead is zero")
}

func TestNewPlanMaxNumSeqs(t *testing.T) {
	p := presetPlan(t, "llama-3.1-8b", "h100-80gb", PlanConfig{MaxModelLen: 1024, MaxNumSeqs: 256})
	assert.Equal(t, int64(256), p.MaxConcurrency)
	assert.Equal(t, "max-num-seqs", p.Limit)
	assert.Greater(t, p.ConcurrencyRatio, 256.0)
}

// vLLM's most common start-up failure: the model's max length does not fit in the KV cache.
func TestPlanDoesNotFitContext(t *testing.T) {
	p := presetPlan(t, "llama-3.1-70b", "h100-80gb", PlanConfig{TensorParallel: 2, MaxModelLen: 32768, RuntimeOverhead: DefaultRuntimeOverhead})
	assert.False(t, p.Fits())
	assert.Zero(t, p.MaxConcurrency)
	assert.Equal(t, int64(26_032), p.MaxContext)
	assert.Equal(t, int64(26_032), p.KVCacheTokens, "for a model without windows, the longest context is the cache's token count")
	err := p.Err()
	require.ErrorIs(t, err, ErrDoesNotFit)
	for _, want := range []string{"32,768 tokens", "5.00 GiB", "3.97 GiB", "max seq len is larger than the maximum number of tokens that can be stored in KV cache", "26,032", "--max-model-len 26032", "--kv-cache-dtype fp8", "--tensor-parallel-size"} {
		assert.Contains(t, err.Error(), want)
	}
	// Taking the advice fits.
	p = presetPlan(t, "llama-3.1-70b", "h100-80gb", PlanConfig{TensorParallel: 2, MaxModelLen: 26032, RuntimeOverhead: DefaultRuntimeOverhead})
	assert.True(t, p.Fits())
	assert.Equal(t, int64(1), p.MaxConcurrency)
}

func TestPlanDoesNotFitWeights(t *testing.T) {
	p := presetPlan(t, "llama-3.1-405b", "h100-80gb", PlanConfig{MaxModelLen: 8192})
	assert.False(t, p.Fits())
	assert.Negative(t, p.KVBudget)
	assert.Zero(t, p.NumBlocks)
	assert.Zero(t, p.MaxContext)
	assert.Equal(t, "weights", p.Limit)
	err := p.Err()
	require.ErrorIs(t, err, ErrDoesNotFit)
	assert.Contains(t, err.Error(), "no room for KV cache")
	assert.Contains(t, err.Error(), "755.96 GiB")
}

func TestPlanHybridModelFitsLongerThanItsBlocks(t *testing.T) {
	// Gemma 3 27B: 52 of 62 layers keep only 1,024 tokens (plus a block), so one request
	// can be far longer than the all-layer blocks would say.
	p := presetPlan(t, "gemma-3-27b", "h100-80gb", PlanConfig{MaxModelLen: 131072, RuntimeOverhead: DefaultRuntimeOverhead})
	assert.True(t, p.Fits())
	assert.Greater(t, p.MaxContext, p.KVCacheTokens)
	assert.Less(t, p.BytesPerRequest, int64(131072)*int64(p.BytesPerTokenPerGPU)/8)
}

func TestNewPlanBadInput(t *testing.T) {
	m, err := ModelPreset("llama-3.1-8b")
	require.NoError(t, err)
	g, err := GPUPreset("h100")
	require.NoError(t, err)
	noLen := m
	noLen.MaxModelLen = 0
	noDType := m
	noDType.DType = 0
	noParams := m
	noParams.Params = 0
	tests := []struct {
		name string
		c    PlanConfig
		err  error
	}{
		{"utilization above 1", PlanConfig{Model: m, GPU: g, GPUMemoryUtilization: 1.5}, ErrInvalidArgument},
		{"negative utilization", PlanConfig{Model: m, GPU: g, GPUMemoryUtilization: -0.5}, ErrInvalidArgument},
		{"negative TP", PlanConfig{Model: m, GPU: g, TensorParallel: -2}, ErrInvalidArgument},
		{"TP not dividing heads", PlanConfig{Model: m, GPU: g, TensorParallel: 3}, ErrInvalidArgument},
		{"no GPU memory", PlanConfig{Model: m}, ErrInvalidArgument},
		{"negative overhead", PlanConfig{Model: m, GPU: g, RuntimeOverhead: -1}, ErrInvalidArgument},
		{"negative max model len", PlanConfig{Model: m, GPU: g, MaxModelLen: -1}, ErrInvalidArgument},
		{"negative block size", PlanConfig{Model: m, GPU: g, BlockSize: -16}, ErrInvalidArgument},
		{"unknown max model len", PlanConfig{Model: noLen, GPU: g}, ErrMissingField},
		{"unknown weights", PlanConfig{Model: noParams, GPU: g}, ErrMissingField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPlan(tt.c)
			assert.ErrorIs(t, err, tt.err)
		})
	}
	// No torch_dtype is vLLM's float32 default, run in bf16 (TestServingDTypeIsVLLMsDTypeAuto).
	p, err := NewPlan(PlanConfig{Model: noDType, GPU: g})
	require.NoError(t, err)
	assert.Equal(t, BF16, p.Config.CacheDType)
}

func TestResolveCacheDType(t *testing.T) {
	m := ModelSpec{DType: FP16}
	for _, s := range []string{"auto", "AUTO", "", " auto "} {
		d, err := ResolveCacheDType(s, m)
		require.NoError(t, err)
		assert.Equal(t, FP16, d)
	}
	d, err := ResolveCacheDType("fp8", m)
	require.NoError(t, err)
	assert.Equal(t, FP8E4M3, d)
	for _, m := range []ModelSpec{{}, {DType: FP32}} {
		d, err = ResolveCacheDType("auto", m)
		require.NoError(t, err)
		assert.Equal(t, BF16, d, "torch_dtype %s: vLLM runs it in bf16", m.DType)
	}
	_, err = ResolveCacheDType("fp7", m)
	assert.ErrorIs(t, err, ErrUnknownDType)
}

// Hand-checked: Llama 3.1 70B on H100s, 10,000 conversations of 8,000 tokens. At TP 8 each
// GPU holds 1 KV head: 40,960 B a token, 327,680,000 B a request; the budget is
// 76,968,728,985 - 17,638,426,624 - 2 GiB = 57,182,818,713 B: 174 requests a replica,
// 58 replicas, 464 GPUs, fewer than any other size needs (30% fewer than TP 4's 668).
func TestPlanFleetChoosesTheFewestGPUs(t *testing.T) {
	m, err := ModelPreset("llama-3.1-70b")
	require.NoError(t, err)
	g, err := GPUPreset("h100-80gb")
	require.NoError(t, err)
	f, err := PlanFleet(FleetConfig{Plan: PlanConfig{Model: m, GPU: g, RuntimeOverhead: DefaultRuntimeOverhead}, Concurrent: 10_000, AvgContext: 8_000})
	require.NoError(t, err)
	assert.True(t, f.ChosenTP)
	assert.Equal(t, 8, f.Replica.Config.TensorParallel)
	assert.Equal(t, int64(57_182_818_713), f.Replica.KVBudget)
	assert.Equal(t, int64(327_680_000), f.BytesPerRequest)
	assert.Equal(t, int64(174), f.PerReplica)
	assert.Equal(t, int64(58), f.Replicas)
	assert.Equal(t, int64(464), f.GPUs)
	assert.Equal(t, int64(10_000)*327_680_000*8, f.CacheBytes)
	assert.True(t, f.Fits())
	assert.Equal(t, int64(464), f.FewestGPUs)
	assert.Equal(t, 8, f.FewestGPUsTP)
	for _, tp := range []int{1, 2, 4, 16} {
		other, err := PlanFleet(FleetConfig{Plan: PlanConfig{Model: m, GPU: g, TensorParallel: tp, RuntimeOverhead: DefaultRuntimeOverhead}, Concurrent: 10_000, AvgContext: 8_000})
		require.NoError(t, err)
		assert.False(t, other.ChosenTP)
		if other.Fits() {
			assert.Greater(t, other.GPUs, f.GPUs, "TP %d", tp)
		}
	}
}

// Llama 3 8B fits one H100: TP 1 needs 179 GPUs for 10,000 requests of 8,000 tokens,
// TP 4 152 (15% fewer) and TP 8 152; a saving under TPSaving keeps TP 1.
func TestPlanFleetKeepsASmallModelOnOneGPU(t *testing.T) {
	m, err := ModelPreset("llama-3-8b")
	require.NoError(t, err)
	g, err := GPUPreset("h100-80gb")
	require.NoError(t, err)
	f, err := PlanFleet(FleetConfig{Plan: PlanConfig{Model: m, GPU: g, RuntimeOverhead: DefaultRuntimeOverhead}, Concurrent: 10_000, AvgContext: 8_000})
	require.NoError(t, err)
	assert.Equal(t, 1, f.Replica.Config.TensorParallel)
	assert.Equal(t, int64(179), f.GPUs)
	assert.Equal(t, int64(152), f.FewestGPUs)
	assert.Equal(t, 4, f.FewestGPUsTP)
}

func TestPlanFleetThatDoesNotFit(t *testing.T) {
	m, err := ModelPreset("llama-3.1-405b")
	require.NoError(t, err)
	g, err := GPUPreset("rtx-4090")
	require.NoError(t, err)
	f, err := PlanFleet(FleetConfig{Plan: PlanConfig{Model: m, GPU: g, TensorParallel: 1}, Concurrent: 10, AvgContext: 1000})
	require.NoError(t, err)
	assert.False(t, f.Fits())
	assert.Zero(t, f.GPUs)
	assert.ErrorIs(t, f.Err(), ErrDoesNotFit)
	// No size up to 8 fits 405B in bf16 on 24 GiB cards: the fleet says so, no error.
	f, err = PlanFleet(FleetConfig{Plan: PlanConfig{Model: m, GPU: g}, Concurrent: 10, AvgContext: 1000, TensorParallelSizes: []int{1, 2, 4, 8}})
	require.NoError(t, err)
	assert.False(t, f.Fits())
	assert.Equal(t, 1, f.Replica.Config.TensorParallel, "the smallest size explains why")
	// 64 of them do: 12 GiB of weights each.
	f, err = PlanFleet(FleetConfig{Plan: PlanConfig{Model: m, GPU: g}, Concurrent: 10, AvgContext: 1000})
	require.NoError(t, err)
	assert.True(t, f.Fits())
	assert.Equal(t, 64, f.Replica.Config.TensorParallel)
}

func TestPlanFleetBadInput(t *testing.T) {
	m, err := ModelPreset("llama-3.1-8b")
	require.NoError(t, err)
	g, err := GPUPreset("h100")
	require.NoError(t, err)
	for _, c := range []FleetConfig{
		{Plan: PlanConfig{Model: m, GPU: g}, Concurrent: 0, AvgContext: 8000},
		{Plan: PlanConfig{Model: m, GPU: g}, Concurrent: 10, AvgContext: 0},
		{Plan: PlanConfig{Model: m, GPU: g}, Concurrent: 10, AvgContext: MaxTokens + 1},
		{Plan: PlanConfig{Model: m, GPU: g, TensorParallel: 3}, Concurrent: 10, AvgContext: 8000},
		{Plan: PlanConfig{Model: m, GPU: g}, Concurrent: 10, AvgContext: 8000, TensorParallelSizes: []int{3, 5}},
		{Plan: PlanConfig{Model: m, GPU: g}, Concurrent: 1 << 62, AvgContext: 1 << 30},
	} {
		_, err := PlanFleet(c)
		assert.ErrorIs(t, err, ErrInvalidArgument)
	}
}

// Properties of the layout for any model, cache type and budget.
func TestKVLayoutProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var groups []LayerGroup
		for i := rapid.IntRange(1, 3).Draw(t, "groups"); i > 0; i-- {
			g := LayerGroup{Layers: rapid.IntRange(1, 128).Draw(t, "layers")}
			if rapid.Bool().Draw(t, "mla") {
				g.LatentDim = rapid.IntRange(1, 1024).Draw(t, "latent")
			} else {
				g.KVHeads = rapid.SampledFrom([]int{1, 2, 4, 8, 16, 64}).Draw(t, "kvHeads")
				g.KHeadDim = rapid.IntRange(1, 512).Draw(t, "k")
				g.VHeadDim = rapid.IntRange(1, 512).Draw(t, "v")
			}
			if rapid.Bool().Draw(t, "sliding") {
				g.Window = rapid.IntRange(1, 1<<16).Draw(t, "window")
			}
			groups = append(groups, g)
		}
		m := ModelSpec{Groups: groups}
		d := rapid.SampledFrom([]DType{FP32, FP16, BF16, FP8E4M3, INT8, NVFP4, MXFP4}).Draw(t, "dtype")
		tp := rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "tp")
		bs := rapid.SampledFrom([]int{1, 8, 16, 32, 128}).Draw(t, "blockSize")
		l, err := NewKVLayout(m, d, tp, bs)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidArgument) // a TP the heads forbid
			return
		}
		require.LessOrEqual(t, l.BitsPerTokenPerGPU(), l.BitsPerToken(), "a GPU never holds more than the whole model")

		a := rapid.Int64Range(0, 1<<24).Draw(t, "a")
		b := rapid.Int64Range(0, 1<<24).Draw(t, "b")
		if a > b {
			a, b = b, a
		}
		require.LessOrEqual(t, l.BytesPerRequest(a), l.BytesPerRequest(b), "more tokens never take less")
		require.LessOrEqual(t, l.BytesPerRequest(b), Bits(b*int64(l.BitsPerTokenPerGPU())).CeilBytes()+int64(len(groups))*l.BytesPerBlock(), "windows only save")

		budget := rapid.Int64Range(0, 1<<40).Draw(t, "budget")
		n, unbounded := l.MaxContext(budget)
		if unbounded {
			require.LessOrEqual(t, l.BytesPerRequest(MaxTokens), budget)
			for _, g := range groups {
				require.True(t, g.Sliding())
			}
		} else if n < MaxTokens {
			require.Greater(t, l.BytesPerRequest(n+1), budget, "one token more does not fit")
			if n > 0 {
				require.LessOrEqual(t, l.BytesPerRequest(n), budget)
			}
		}
		ctx := rapid.Int64Range(1, 1<<20).Draw(t, "ctx")
		c := l.MaxConcurrency(budget, ctx)
		per := l.BytesPerRequest(ctx)
		require.LessOrEqual(t, c*per, budget)
		require.Greater(t, (c+1)*per, budget)

		// fp8 is exactly half of fp16, per token and per block.
		h, err := NewKVLayout(m, FP16, tp, bs)
		require.NoError(t, err)
		e, err := NewKVLayout(m, FP8E4M3, tp, bs)
		require.NoError(t, err)
		require.Equal(t, h.BitsPerToken(), 2*e.BitsPerToken())
		require.Equal(t, h.BytesPerBlock(), 2*e.BytesPerBlock())
	})
}

func TestNoFitErrorMentionsNothingWhenItFits(t *testing.T) {
	p := presetPlan(t, "llama-3.1-8b", "h100", PlanConfig{MaxModelLen: 8192})
	require.NoError(t, p.Err())
	assert.True(t, strings.HasPrefix((&NoFitError{Plan: p}).Error(), "does not fit"))
}
