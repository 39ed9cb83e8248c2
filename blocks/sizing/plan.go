package sizing

import (
	"fmt"
	"math"
	"strings"
)

// Planning defaults, vLLM's where vLLM has one.
const (
	// DefaultGPUMemoryUtilization is vLLM's default --gpu-memory-utilization: the fraction
	// of the GPU's memory the server may use for weights, activations and KV cache.
	DefaultGPUMemoryUtilization = 0.9
	// DefaultRuntimeOverhead is the memory per GPU assumed for everything that is neither
	// weights nor KV cache: the CUDA context and libraries (cuBLAS, NCCL), the peak
	// activations of a profiling batch, and CUDA graphs. 2 GiB is a middle figure for a
	// 7B-70B model at vLLM's default batch; vLLM logs the real one at start-up ("non-torch
	// memory", "activation peak memory", "CUDA graph"), which can be put here instead.
	DefaultRuntimeOverhead int64 = 2 << 30
)

// PlanConfig describes a deployment to size: a model on TensorParallel GPUs of one kind.
// Zero fields take the defaults noted.
type PlanConfig struct {
	Model ModelSpec
	GPU   GPU
	// TensorParallel is the number of GPUs the model is split over; 0 means 1.
	TensorParallel int
	// CacheDType is the KV cache's data type; 0 means vLLM's "auto" (Model.AutoCacheDType:
	// the checkpoint's declared KV cache data type, else the one the model runs in).
	CacheDType DType
	// BlockSize is the tokens per block; 0 means DefaultBlockSize.
	BlockSize int
	// GPUMemoryUtilization is the fraction of GPU memory usable; 0 means the default 0.9.
	GPUMemoryUtilization float64
	// RuntimeOverhead is the memory per GPU that is neither weights nor KV cache. Zero is
	// zero: use DefaultRuntimeOverhead for the planner's default.
	RuntimeOverhead int64
	// WeightBytes is the size of all the weights; 0 means the model's (its WeightBytes, or
	// its parameters times its weight data type).
	WeightBytes int64
	// MaxModelLen is the longest context one request may reach (vLLM's --max-model-len);
	// 0 means the model's MaxModelLen.
	MaxModelLen int
	// MaxNumSeqs caps concurrency as vLLM's --max-num-seqs does; 0 means no cap.
	MaxNumSeqs int
}

// ResolveCacheDType reads a --kv-cache-dtype value: "auto" (or "") is m.AutoCacheDType(),
// the KV cache data type the checkpoint's quantization_config declares (fp8_e4m3 for a
// ModelOpt or compressed-tensors fp8 KV cache), else the data type vLLM runs the model in,
// m.ServingDType() (bf16 for a config with torch_dtype float32 or none, as vLLM's --dtype
// auto resolves it); anything else goes to ParseDType.
func ResolveCacheDType(s string, m ModelSpec) (DType, error) {
	if t := strings.ToLower(strings.TrimSpace(s)); t == "" || t == "auto" {
		return m.AutoCacheDType(), nil
	}
	return ParseDType(s)
}

// Plan is a sized deployment. Byte counts are per GPU unless their name says otherwise.
type Plan struct {
	// Config is the configuration with its defaults filled in.
	Config PlanConfig
	// Layout is the model's KV cache laid out on the GPUs.
	Layout KVLayout

	GPUMemory     int64 // bytes of one GPU
	UsableMemory  int64 // GPUMemory x utilization
	WeightsTotal  int64 // bytes of all the weights
	WeightsPerGPU int64 // WeightsTotal / TensorParallel, rounded up
	// KVBudget is what is left for the KV cache: UsableMemory - WeightsPerGPU -
	// RuntimeOverhead. Negative when the weights do not fit.
	KVBudget int64

	BytesPerToken       Bits  // whole model, all layers, before tensor parallelism, no windows
	BytesPerTokenPerGPU Bits  // all layers on one GPU, no windows
	BytesPerBlock       int64 // one block of BlockSize tokens, all layers
	NumBlocks           int64 // blocks that fit in KVBudget
	KVCacheTokens       int64 // NumBlocks x BlockSize: vLLM's "GPU KV cache size: N tokens"

	BytesPerRequest int64 // one request at MaxModelLen, windows applied, in whole blocks
	// ModelBytesPerRequest is BytesPerRequest for the whole model, before the tensor-
	// parallel split.
	ModelBytesPerRequest int64
	// StateBytesPerRequest is the Mamba / linear-attention state one request holds on one
	// GPU (part of BytesPerRequest): 0 without state layers.
	StateBytesPerRequest int64
	// MaxConcurrency is how many requests at MaxModelLen fit at once, capped by MaxNumSeqs.
	MaxConcurrency int64
	// ConcurrencyRatio is KVBudget / BytesPerRequest: vLLM's "Maximum concurrency for N
	// tokens per request: X.XXx".
	ConcurrencyRatio float64
	// Limit says what bounds MaxConcurrency: "kv-cache", "max-num-seqs" or "weights".
	Limit string
	// MaxContext is the longest context for which one request fits.
	MaxContext int64
	// MaxContextUnbounded: every layer has a sliding window and any context fits.
	MaxContextUnbounded bool
}

// NewPlan sizes the deployment c describes. It fails only on bad input (a typed error:
// errors.Is with ErrInvalidArgument, ErrMissingField, ...). A deployment that does not fit
// is a Plan all the same: check Fits, and Err for the plain explanation.
func NewPlan(c PlanConfig) (Plan, error) {
	c, err := c.withDefaults()
	if err != nil {
		return Plan{}, err
	}
	l, err := NewKVLayout(c.Model, c.CacheDType, c.TensorParallel, c.BlockSize)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Config: c, Layout: l, GPUMemory: c.GPU.MemoryBytes(), WeightsTotal: c.WeightBytes}
	p.UsableMemory = int64(math.Floor(float64(p.GPUMemory) * c.GPUMemoryUtilization))
	p.WeightsPerGPU = (c.WeightBytes + int64(c.TensorParallel) - 1) / int64(c.TensorParallel)
	p.KVBudget = p.UsableMemory - p.WeightsPerGPU - c.RuntimeOverhead
	p.BytesPerToken = l.BitsPerToken()
	p.BytesPerTokenPerGPU = l.BitsPerTokenPerGPU()
	p.BytesPerBlock = l.BytesPerBlock()
	p.BytesPerRequest = l.BytesPerRequest(int64(c.MaxModelLen))
	p.ModelBytesPerRequest = l.ModelBytesPerRequest(int64(c.MaxModelLen))
	p.StateBytesPerRequest = l.StateBytesPerRequest()
	if p.KVBudget > 0 {
		p.NumBlocks = p.KVBudget / p.BytesPerBlock
		p.KVCacheTokens = p.NumBlocks * int64(c.BlockSize)
		p.ConcurrencyRatio = float64(p.KVBudget) / float64(p.BytesPerRequest)
	}
	p.MaxConcurrency = l.MaxConcurrency(p.KVBudget, int64(c.MaxModelLen))
	p.Limit = "kv-cache"
	switch {
	case p.KVBudget <= 0:
		p.Limit = "weights"
	case c.MaxNumSeqs > 0 && p.MaxConcurrency > int64(c.MaxNumSeqs):
		p.MaxConcurrency = int64(c.MaxNumSeqs)
		p.Limit = "max-num-seqs"
	}
	p.MaxContext, p.MaxContextUnbounded = l.MaxContext(p.KVBudget)
	return p, nil
}

func (c PlanConfig) withDefaults() (PlanConfig, error) {
	m, err := c.Model.OnGPU(c.GPU)
	if err != nil {
		return c, err
	}
	c.Model = m
	if c.TensorParallel == 0 {
		c.TensorParallel = 1
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.GPUMemoryUtilization == 0 {
		c.GPUMemoryUtilization = DefaultGPUMemoryUtilization
	}
	if c.CacheDType == 0 {
		c.CacheDType = c.Model.AutoCacheDType()
	}
	if c.MaxModelLen == 0 {
		if c.Model.MaxModelLen == 0 {
			return c, missingField("max_position_embeddings", "the model's longest context is unknown: give --max-model-len")
		}
		c.MaxModelLen = c.Model.MaxModelLen
	}
	if c.WeightBytes == 0 {
		w, err := c.Model.TotalWeightBytes()
		if err != nil {
			return c, err
		}
		c.WeightBytes = w
	}
	switch {
	case c.TensorParallel < 0:
		return c, invalidf("tensor parallel size %d is negative", c.TensorParallel)
	case !(c.GPUMemoryUtilization > 0 && c.GPUMemoryUtilization <= 1):
		return c, invalidf("GPU memory utilization %g must be in (0, 1]", c.GPUMemoryUtilization)
	case c.GPU.Bytes == 0 && (c.GPU.MemoryMiB <= 0 || c.GPU.MemoryMiB > 1<<30):
		return c, invalidf("GPU memory %d MiB", c.GPU.MemoryMiB)
	case c.GPU.Bytes < 0 || c.GPU.Bytes > 1<<50:
		return c, invalidf("GPU memory %d bytes", c.GPU.Bytes)
	case c.RuntimeOverhead < 0 || c.RuntimeOverhead > 1<<50:
		return c, invalidf("runtime overhead %d bytes", c.RuntimeOverhead)
	case c.WeightBytes < 0 || c.WeightBytes > 1<<56:
		return c, invalidf("weights of %d bytes", c.WeightBytes)
	case c.MaxModelLen < 0 || c.MaxModelLen > MaxTokens:
		return c, invalidf("max model len %d must be between 1 and %d", c.MaxModelLen, MaxTokens)
	case c.MaxNumSeqs < 0:
		return c, invalidf("max num seqs %d is negative", c.MaxNumSeqs)
	}
	return c, nil
}

// Fits reports whether the server could start: the weights and overhead leave room for
// KV cache, and one request at MaxModelLen fits in it.
func (p Plan) Fits() bool { return p.KVBudget > 0 && p.MaxConcurrency > 0 }

// Err returns nil when the plan fits, and otherwise a *NoFitError (wrapping ErrDoesNotFit)
// that says plainly why and what to change.
func (p Plan) Err() error {
	if p.Fits() {
		return nil
	}
	return &NoFitError{Plan: p}
}

// NoFitError explains a plan that does not fit. It wraps ErrDoesNotFit.
type NoFitError struct{ Plan Plan }

// Unwrap returns ErrDoesNotFit.
func (e *NoFitError) Unwrap() error { return ErrDoesNotFit }

func (e *NoFitError) Error() string {
	p := e.Plan
	c := p.Config
	if p.KVBudget <= 0 {
		return fmt.Sprintf("does not fit: the weights take %s per GPU and the runtime overhead %s, "+
			"but only %s of the GPU's %s is usable at --gpu-memory-utilization %.2f, "+
			"which leaves no room for KV cache. Split the model over more GPUs (--tensor-parallel-size), "+
			"use a quantized checkpoint, or a GPU with more memory.",
			GiB(p.WeightsPerGPU), GiB(c.RuntimeOverhead), GiB(p.UsableMemory), GiB(p.GPUMemory), c.GPUMemoryUtilization)
	}
	msg := fmt.Sprintf("does not fit: one request at the maximum model length (%s tokens) needs %s of KV cache per GPU, "+
		"but only %s is left for it (%s usable - %s weights - %s overhead). "+
		"This is vLLM's start-up failure \"max seq len is larger than the maximum number of tokens that can be stored in KV cache\". ",
		groupDigits(int64(c.MaxModelLen)), GiB(p.BytesPerRequest), GiB(p.KVBudget),
		GiB(p.UsableMemory), GiB(p.WeightsPerGPU), GiB(c.RuntimeOverhead))
	if p.MaxContext > 0 {
		msg += fmt.Sprintf("The longest context that fits is %s tokens: set --max-model-len %d or less, ", groupDigits(p.MaxContext), p.MaxContext)
	} else {
		msg += "Not even one block fits: "
	}
	return msg + "or raise --gpu-memory-utilization, use --kv-cache-dtype fp8, or add GPUs with --tensor-parallel-size."
}

// GiB formats a byte count in GiB with two decimals.
func GiB(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }

// groupDigits writes n with thousands separators: 131,072.
func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
