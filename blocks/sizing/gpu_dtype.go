package sizing

import "fmt"

// ErrDTypeNotOnGPU: a data type the GPU cannot run the model in, as vLLM refuses it
// (--dtype bfloat16 below compute capability 8.0). It wraps ErrInvalidArgument.
var ErrDTypeNotOnGPU = fmt.Errorf("%w: data type not supported on the GPU", ErrInvalidArgument)

// bf16Capability is the compute capability from which CUDA GPUs run bf16 (Ampere):
// vllm/platforms/cuda.py CudaPlatformBase.supported_dtypes lists bf16, fp16 and fp32 from
// 8.0, fp16 and fp32 from 6.0 ("Pascal, Volta and Turing NVIDIA GPUs, BF16 is not
// supported"), and fp32 alone below.
const (
	bf16Capability = 80
	fp16Capability = 60
)

// OnGPU returns m as vLLM serves it on g: below compute capability 8.0 (V100 7.0, T4 7.5)
// --dtype auto runs what it would run in bf16 in fp16 instead, and the five model types
// that refuse fp16 (gemma2, gemma3, gemma3_text, plamo2, glm4) in fp32, which doubles
// their weights and their KV cache under --kv-cache-dtype auto (ServingDType,
// _resolve_auto_dtype's fallback to the platform's first supported type). --dtype
// bfloat16 (RunDType BF16) there is refused with ErrDTypeNotOnGPU, as vLLM's
// check_if_supports_dtype raises "Bfloat16 is only supported on GPUs with compute
// capability of at least 8.0". A GPU of unknown capability (0) or of 8.0 and later
// changes nothing. NewPlan applies it to its config's model; a caller that resolves
// --kv-cache-dtype auto itself (ResolveCacheDType) applies it first.
//
// An fp8 KV cache is not refused on any capability: vLLM picks an attention backend that
// takes it (FlashInfer's native kernels from 7.x, Triton's), so only the sizing of the
// cache matters here, and that is the same on every GPU.
func (m ModelSpec) OnGPU(g GPU) (ModelSpec, error) {
	c := g.ComputeCapability
	switch {
	case c < 0 || c > 1000:
		return m, invalidf("GPU %s: compute capability %d", g.Name, c)
	case c == 0 || c >= bf16Capability:
		m.gpuCapability = 0
		return m, nil
	case m.RunDType == BF16:
		return m, fmt.Errorf("%w: --dtype bfloat16 needs compute capability 8.0 or later, and %s has %d.%d; run it in float16 (--dtype half) or float32",
			ErrDTypeNotOnGPU, g.Name, c/10, c%10)
	}
	m.gpuCapability = c
	return m, nil
}

// preAmpereDType is the data type --dtype auto runs m in on a GPU of compute capability
// c below 8.0: the first of the platform's supported types the model takes (fp16, or
// fp32 for a model type that refuses fp16 and below 6.0), for every torch_dtype (an fp32
// config is downcast to it, a bf16 one falls back to it) but an fp16 one, which is
// supported as it is where fp16 is.
func (m ModelSpec) preAmpereDType(c int) DType {
	if c < fp16Capability || fp16Refused(m.ModelType) {
		return FP32
	}
	return FP16
}
