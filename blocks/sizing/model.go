package sizing

import (
	"fmt"
	"math/bits"
)

// LayerGroup is a run of decoder layers that cache the same thing: full, sliding-window
// or chunked local attention with KVHeads heads of KHeadDim (K) and VHeadDim (V) values
// per token, multi-head latent attention (MLA, DeepSeek) with one latent vector of
// LatentDim values per token, or a Mamba / linear-attention state of StateValues values
// per sequence, whatever its length.
type LayerGroup struct {
	// Layers is how many decoder layers the group has.
	Layers int `json:"layers"`
	// Window is the sliding window in tokens; 0 means full attention (every token stays).
	// With Chunked it is the attention chunk instead.
	Window int `json:"window,omitempty"`
	// Chunked marks chunked local attention (Llama 4): a token attends to the tokens of
	// its own chunk of Window tokens, so a layer never holds more than a window does.
	Chunked bool `json:"chunked,omitempty"`
	// StateValues, for a Mamba or linear-attention (Gated DeltaNet) group, is the values
	// of one sequence's state in one layer: convolution state plus recurrent state. Such a
	// group has no heads and caches nothing per token. 0 for attention.
	StateValues int64 `json:"state_values,omitempty"`
	// KVHeads is the number of KV heads (equal to the query heads without grouped-query
	// attention). 0 for MLA.
	KVHeads int `json:"kv_heads,omitempty"`
	// KHeadDim and VHeadDim are the values per head of K and of V; they may differ.
	KHeadDim int `json:"k_head_dim,omitempty"`
	VHeadDim int `json:"v_head_dim,omitempty"`
	// LatentDim, for MLA, is the values cached per token per layer: kv_lora_rank +
	// qk_rope_head_dim (512 + 64 = 576 for DeepSeek-V3). Not split into K and V, not into
	// heads. 0 for ordinary attention.
	LatentDim int `json:"latent_dim,omitempty"`
}

// MLA reports whether the group caches an MLA latent rather than K and V heads.
func (g LayerGroup) MLA() bool { return g.LatentDim > 0 }

// Sliding reports whether the group keeps only a window (or a chunk) of recent tokens.
func (g LayerGroup) Sliding() bool { return g.Window > 0 }

// State reports whether the group keeps a fixed state per sequence (Mamba, linear
// attention) rather than tokens.
func (g LayerGroup) State() bool { return g.StateValues > 0 }

// limits keep every product of the sizing inside int64: a token count of at most
// MaxTokens times at most maxBitsPerToken bits is below 2^62.
const (
	// MaxTokens is the largest context or token count the sizing accepts (2^31 - 1).
	MaxTokens       = 1<<31 - 1
	maxBitsPerToken = 1 << 31
	maxDim          = 1 << 20
	// maxStateValues bounds one layer's state (Jamba's is 155,648 values, Qwen3-Next's
	// 548,864): layers x state x 32 bits stays below 2^62.
	maxStateValues = 1 << 36
)

func (g LayerGroup) validate(i int) error {
	switch {
	case g.Layers <= 0 || g.Layers > maxDim:
		return invalidf("layer group %d: %d layers", i, g.Layers)
	case g.Window < 0 || g.Window > MaxTokens:
		return invalidf("layer group %d: window %d", i, g.Window)
	case g.Chunked && g.Window == 0:
		return invalidf("layer group %d: chunked attention without a chunk size", i)
	case g.StateValues < 0 || g.StateValues > maxStateValues:
		return invalidf("layer group %d: state of %d values", i, g.StateValues)
	case g.State():
		if g.KVHeads != 0 || g.KHeadDim != 0 || g.VHeadDim != 0 || g.LatentDim != 0 || g.Window != 0 || g.Chunked {
			return invalidf("layer group %d: a state group has no heads, latent, window or chunk", i)
		}
	case g.MLA():
		if g.KVHeads != 0 || g.KHeadDim != 0 || g.VHeadDim != 0 {
			return invalidf("layer group %d: an MLA group has a latent, not KV heads", i)
		}
		if g.LatentDim > maxDim {
			return invalidf("layer group %d: latent dim %d", i, g.LatentDim)
		}
	case g.KVHeads <= 0 || g.KVHeads > maxDim:
		return invalidf("layer group %d: %d KV heads", i, g.KVHeads)
	case g.KHeadDim <= 0 || g.KHeadDim > maxDim || g.VHeadDim <= 0 || g.VHeadDim > maxDim:
		return invalidf("layer group %d: head dims K %d, V %d", i, g.KHeadDim, g.VHeadDim)
	case g.LatentDim < 0:
		return invalidf("layer group %d: latent dim %d", i, g.LatentDim)
	}
	return nil
}

// kvHeadsPerGPU is how many KV heads one GPU holds under tensor parallelism: the heads are
// divided across the GPUs, and when there are fewer heads than GPUs each head is
// replicated so that every GPU holds one (vLLM's rule).
func (g LayerGroup) kvHeadsPerGPU(tp int) int {
	if g.KVHeads >= tp {
		return g.KVHeads / tp
	}
	return 1
}

// bitsPerToken is the bits one token takes in all layers of the group on one GPU of tp.
// An MLA latent is replicated on every GPU, as vLLM does.
func (g LayerGroup) bitsPerToken(d DType, tp int) int64 {
	if g.State() {
		return 0
	}
	if g.MLA() {
		return int64(g.Layers) * d.VectorBits(int64(g.LatentDim))
	}
	perHead := d.VectorBits(int64(g.KHeadDim)) + d.VectorBits(int64(g.VHeadDim))
	return int64(g.Layers) * int64(g.kvHeadsPerGPU(tp)) * perHead
}

// stateBits is the bits one sequence's state takes in all layers of the group on one GPU
// of tp: tensor parallelism splits Mamba's inner dimension and linear attention's heads,
// so each GPU holds a tp-th of it (rounded up).
func (g LayerGroup) stateBits(d DType, tp int) int64 {
	if !g.State() {
		return 0
	}
	return int64(g.Layers) * d.VectorBits((g.StateValues+int64(tp)-1)/int64(tp))
}

// ModelSpec is what the sizing needs to know of a model: its layer groups, its heads for
// the tensor-parallel rules, its data type, and its weights.
type ModelSpec struct {
	// Name is the preset name, or the config's model_type for a parsed config.
	Name string `json:"name"`
	// Groups are the layer groups, in no particular order.
	Groups []LayerGroup `json:"groups"`
	// AttentionHeads is the number of query heads; tensor parallelism must divide it.
	// 0 when unknown (the check is skipped).
	AttentionHeads int `json:"attention_heads,omitempty"`
	// DType is the checkpoint's data type as config.json gives it (torch_dtype, or dtype):
	// 0 when the config does not say. The model is sized in ServingDType, the data type
	// vLLM's --dtype auto runs it in: the weights (unless WeightDType), the Mamba /
	// linear-attention state (vLLM's --mamba-cache-dtype and --mamba-ssm-cache-dtype auto,
	// whatever the KV cache's data type), and the KV cache under --kv-cache-dtype auto.
	DType DType `json:"-"`
	// RunDType is the data type given with vLLM's --dtype (WithRunDType): 0 for auto, its
	// default, when ServingDType follows DType.
	RunDType DType `json:"-"`
	// ModelType is the config's model_type ("llama", "gemma2"): vLLM runs a few model
	// types in bf16 or fp32 only. "" when unknown.
	ModelType string `json:"-"`
	// KVDType is the KV cache data type the checkpoint declares in its
	// quantization_config (a ModelOpt kv_cache_quant_algo or kv_cache_scheme, a
	// compressed-tensors kv_cache_scheme: kvscheme.go), which vLLM's --kv-cache-dtype
	// auto takes over ServingDType; 0 when it declares none (AutoCacheDType).
	KVDType DType `json:"-"`
	// gpuCapability is the compute capability of the GPU m is served on when it is below
	// 8.0 (OnGPU), else 0: ServingDType then picks from fp16 and fp32.
	gpuCapability int
	// WeightDType is the data type the weights are stored in when it differs from DType
	// (an fp8 or mxfp4 checkpoint); 0 means DType.
	WeightDType DType `json:"-"`
	// Params is the parameter count; 0 when unknown.
	Params int64 `json:"params,omitempty"`
	// WeightBytes, when not 0, is the size of the weights as loaded, given directly (for a
	// checkpoint whose parameters are not all of one type, such as gpt-oss).
	WeightBytes int64 `json:"weight_bytes,omitempty"`
	// MaxModelLen is the longest context the model supports (max_position_embeddings):
	// what vLLM uses when --max-model-len is not given. 0 when unknown.
	MaxModelLen int `json:"max_model_len,omitempty"`
	// Source says where the values come from.
	Source string `json:"source,omitempty"`
	// Notes are the assumptions made while reading a config (a default taken for an absent
	// field), to be shown with any result.
	Notes []string `json:"notes,omitempty"`
}

// Validate checks that the spec describes a model the sizing can handle.
func (m ModelSpec) Validate() error {
	if len(m.Groups) == 0 {
		return invalidf("model %q has no layer groups", m.Name)
	}
	layers := 0
	for i, g := range m.Groups {
		if err := g.validate(i); err != nil {
			return err
		}
		layers += g.Layers
	}
	if layers > maxDim {
		return invalidf("model %q has %d layers", m.Name, layers)
	}
	switch {
	case m.AttentionHeads < 0 || m.AttentionHeads > maxDim:
		return invalidf("model %q: %d attention heads", m.Name, m.AttentionHeads)
	case m.Params < 0 || m.WeightBytes < 0:
		return invalidf("model %q: negative parameter count or weight size", m.Name)
	case m.MaxModelLen < 0 || m.MaxModelLen > MaxTokens:
		return invalidf("model %q: max model len %d", m.Name, m.MaxModelLen)
	case m.DType != 0 && !m.DType.Valid(), m.WeightDType != 0 && !m.WeightDType.Valid(), m.KVDType != 0 && !m.KVDType.Valid():
		return invalidf("model %q: invalid data type", m.Name)
	case m.RunDType != 0 && m.RunDType != FP16 && m.RunDType != BF16 && m.RunDType != FP32:
		return invalidf("model %q: run data type %s (vLLM's --dtype: fp16, bf16 or fp32)", m.Name, m.RunDType)
	}
	if b := m.bitsPerToken(FP32, 1); b > maxBitsPerToken {
		return invalidf("model %q: %d bits of KV cache per token is beyond any real model", m.Name, b)
	}
	return nil
}

// NumLayers returns the number of decoder layers that hold KV cache or state.
func (m ModelSpec) NumLayers() int {
	n := 0
	for _, g := range m.Groups {
		n += g.Layers
	}
	return n
}

func (m ModelSpec) bitsPerToken(d DType, tp int) int64 {
	var total int64
	for _, g := range m.Groups {
		total += g.bitsPerToken(d, tp)
	}
	return total
}

// KVBitsPerToken returns the formula's value for the whole model: 2 (K and V) x layers x
// KV heads x head dim x bits per value summed over the layer groups (one latent per layer
// for MLA), before any tensor-parallel split and ignoring windows. State groups hold no
// tokens and count 0 here (StateBytes has them). For Llama 3 70B in
// fp16 it is 2,621,440 bits: 327,680 bytes.
func (m ModelSpec) KVBitsPerToken(d DType) (Bits, error) {
	if err := m.Validate(); err != nil {
		return 0, err
	}
	if !d.Valid() {
		return 0, invalidf("invalid cache data type")
	}
	return Bits(m.bitsPerToken(d, 1)), nil
}

// ServingDType is the data type vLLM runs m in under --dtype auto, its default, on a GPU of
// compute capability 8.0 or later (A100 8.0, L40S and RTX 4090 8.9, H100 and H200 9.0,
// B200 10.0; a custom GPU is assumed to be one): fp16 when DType is fp16 (but for the
// five model types below, which fall back to bf16), bf16 otherwise (float32, not given,
// or a type no model runs in, such as fp8). On an older GPU (m.OnGPU: the V100 and T4
// presets) it is fp16, or fp32 for the five.
// vLLM's rule (vllm/config/model.py):
//
//   - _find_dtype: the config's torch_dtype (or dtype, then text_config's, vision_config's,
//     encoder_config's); without one, the dtype of the checkpoint's safetensors, which a
//     config.json does not carry; without that, float32.
//   - _resolve_auto_dtype: the platform's supported dtypes (vllm/platforms/cuda.py,
//     CudaPlatformBase.supported_dtypes: bf16, fp16, fp32 from compute capability 8.0; fp16,
//     fp32 from 6.0), less fp16 for gemma2, gemma3, gemma3_text, plamo2 and glm4. A float32
//     model is downcast to the first of them (fp16 for a pooling model), and a dtype not
//     in the list (fp8, int8) falls back to the first too, with a warning.
//
// So without torch_dtype a checkpoint saved in fp16 would run in fp16, the same 2 bytes a
// value as the bf16 assumed here; one in fp32 runs in bf16. On a 6.x-7.x GPU a float32 or
// bf16 model runs in fp16 (2 bytes again), and the five models above in fp32 (OnGPU).
//
// --kv-cache-dtype auto is this data type (vllm/utils/torch_utils.py,
// kv_cache_dtype_str_to_dtype returns model_config.dtype), and so is --mamba-cache-dtype
// auto (MambaStateDtypeCalculator through get_kv_cache_torch_dtype), and
// --mamba-ssm-cache-dtype auto follows the conv state's, so --kv-cache-dtype never
// reaches the state.
//
// A RunDType (vLLM's --dtype other than auto) overrides all of it.
func (m ModelSpec) ServingDType() DType {
	if m.RunDType != 0 {
		return m.RunDType
	}
	if m.gpuCapability != 0 {
		return m.preAmpereDType(m.gpuCapability)
	}
	if m.DType == FP16 && !fp16Refused(m.ModelType) {
		return FP16
	}
	return BF16
}

// AutoCacheDType is the KV cache data type of vLLM's --kv-cache-dtype auto: the one the
// checkpoint declares (KVDType: vllm/utils/torch_utils.py resolve_kv_cache_dtype_string,
// and the Attention layer's compressed-tensors kv_cache_scheme rule), else the data type
// the model runs in (ServingDType: kv_cache_dtype_str_to_dtype). --dtype does not change
// a declared one. The Mamba state never takes it (ServingDType).
func (m ModelSpec) AutoCacheDType() DType {
	if m.KVDType != 0 {
		return m.KVDType
	}
	return m.ServingDType()
}

// StateBytes returns the Mamba / linear-attention state one sequence holds in the whole
// model, in data type d, whatever its length: 0 when the model has no state groups.
func (m ModelSpec) StateBytes(d DType) int64 {
	var b int64
	for _, g := range m.Groups {
		b += g.stateBits(d, 1)
	}
	return Bits(b).CeilBytes()
}

// TotalWeightBytes returns the bytes of the weights: WeightBytes when given, otherwise
// Params x the weight data type (WeightDType, else ServingDType: vLLM loads the weights of
// a float32 checkpoint in bf16 under --dtype auto). It fails with ErrMissingField when
// neither WeightBytes nor Params is known.
func (m ModelSpec) TotalWeightBytes() (int64, error) {
	if m.WeightBytes > 0 {
		return m.WeightBytes, nil
	}
	if m.Params <= 0 {
		return 0, &FieldError{Field: "params", Reason: "the parameter count is unknown: give it, or the weight size", Err: ErrMissingField}
	}
	d := m.WeightDType
	if d == 0 {
		d = m.ServingDType()
	}
	hi, lo := bits.Mul64(uint64(m.Params), uint64(d.BitsPerValue()*16))
	if hi != 0 || lo > 1<<62 {
		return 0, invalidf("model %q: %d parameters overflow", m.Name, m.Params)
	}
	// BitsPerValue x 16 is an integer for every DType (4.25 x 16 = 68).
	return int64((lo + 127) / 128), nil
}

// Bits is an exact size in bits. KV sizes are kept in bits because a block-scaled 4-bit
// cache can take a fractional number of bytes per token.
type Bits int64

// Bytes returns the size in bytes, fractional when it is not a whole number of bytes.
func (b Bits) Bytes() float64 { return float64(b) / 8 }

// WholeBytes returns the size in bytes and whether it is a whole number of bytes.
func (b Bits) WholeBytes() (int64, bool) { return int64(b) / 8, b%8 == 0 }

// CeilBytes returns the size rounded up to whole bytes.
func (b Bits) CeilBytes() int64 { return (int64(b) + 7) / 8 }

// String prints whole bytes as an integer and fractional ones with their fraction.
func (b Bits) String() string {
	if n, ok := b.WholeBytes(); ok {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%g B", b.Bytes())
}
