package sizing

// DefaultBlockSize is vLLM's default --block-size on CUDA: 16 tokens a block.
const DefaultBlockSize = 16

// KVLayout is a model's KV cache laid out on a tensor-parallel group of GPUs in blocks of
// BlockSize tokens: the per-token, per-block and per-request sizes, per GPU.
//
// A block here spans every layer, as in vLLM's uniform layout: BytesPerBlock is what one
// block of BlockSize tokens takes in all layers on one GPU. A sliding-window layer group
// needs at most its window plus one block of those tokens, so a request on a model with
// sliding-window layers takes less than its blocks times BytesPerBlock: BytesPerRequest
// counts each group by itself. A state group (Mamba, linear attention) holds one state
// per request whatever its length, in the data type the model runs in (vLLM's
// mamba_cache_dtype auto: ModelSpec.ServingDType), never the cache's.
type KVLayout struct {
	model     ModelSpec
	dtype     DType
	tp        int
	blockSize int
	perGPU    []int64 // bits per token per GPU, one per group
	whole     []int64 // bits per token in the whole model, one per group
	total     int64   // bits per token, whole model, before tensor parallelism
	// stateGPU and stateWhole are the bits of one sequence's Mamba / linear-attention
	// state, per GPU and in the whole model.
	stateGPU, stateWhole int64
}

// NewKVLayout lays out m's KV cache in dtype d over tp GPUs in blocks of blockSize tokens.
// Tensor parallelism must divide the attention heads, and divide the KV heads or be a
// multiple of them (vLLM's rules); an MLA latent is replicated on every GPU.
func NewKVLayout(m ModelSpec, d DType, tp, blockSize int) (KVLayout, error) {
	if err := m.Validate(); err != nil {
		return KVLayout{}, err
	}
	if !d.Valid() {
		return KVLayout{}, invalidf("invalid cache data type")
	}
	if tp <= 0 || tp > maxDim {
		return KVLayout{}, invalidf("tensor parallel size %d must be positive", tp)
	}
	if blockSize <= 0 || blockSize > 1<<16 {
		return KVLayout{}, invalidf("block size %d must be between 1 and 65536 tokens", blockSize)
	}
	if m.AttentionHeads > 0 && m.AttentionHeads%tp != 0 {
		return KVLayout{}, invalidf("tensor parallel size %d does not divide the %d attention heads of %s", tp, m.AttentionHeads, m.Name)
	}
	l := KVLayout{model: m, dtype: d, tp: tp, blockSize: blockSize, perGPU: make([]int64, len(m.Groups)), whole: make([]int64, len(m.Groups))}
	for i, g := range m.Groups {
		if !g.MLA() && !g.State() {
			if g.KVHeads >= tp && g.KVHeads%tp != 0 {
				return KVLayout{}, invalidf("tensor parallel size %d does not divide the %d KV heads of %s", tp, g.KVHeads, m.Name)
			}
			if g.KVHeads < tp && tp%g.KVHeads != 0 {
				return KVLayout{}, invalidf("tensor parallel size %d is not a multiple of the %d KV heads of %s", tp, g.KVHeads, m.Name)
			}
		}
		l.perGPU[i] = g.bitsPerToken(d, tp)
		l.whole[i] = g.bitsPerToken(d, 1)
		l.total += l.whole[i]
		sd := m.ServingDType()
		l.stateGPU += g.stateBits(sd, tp)
		l.stateWhole += g.stateBits(sd, 1)
	}
	if l.total > maxBitsPerToken {
		return KVLayout{}, invalidf("model %q: %d bits of KV cache per token is beyond any real model", m.Name, l.total)
	}
	return l, nil
}

// Model returns the model laid out.
func (l KVLayout) Model() ModelSpec { return l.model }

// DType returns the cache data type.
func (l KVLayout) DType() DType { return l.dtype }

// TensorParallel returns the number of GPUs the layout spans.
func (l KVLayout) TensorParallel() int { return l.tp }

// BlockSize returns the tokens per block.
func (l KVLayout) BlockSize() int { return l.blockSize }

// BitsPerToken returns the KV cache of one token in the whole model: all layers, all
// heads, before the tensor-parallel split, ignoring windows.
func (l KVLayout) BitsPerToken() Bits { return Bits(l.total) }

// BitsPerTokenPerGPU returns the KV cache of one token in all layers on one GPU, with KV
// heads divided (or replicated) across the GPUs, ignoring windows.
func (l KVLayout) BitsPerTokenPerGPU() Bits {
	var b int64
	for _, x := range l.perGPU {
		b += x
	}
	return Bits(b)
}

// BytesPerBlock returns the bytes of one block (BlockSize tokens, all layers) on one GPU.
func (l KVLayout) BytesPerBlock() int64 {
	return Bits(int64(l.blockSize) * int64(l.BitsPerTokenPerGPU())).CeilBytes()
}

// blocksInGroup returns the blocks a request of tokens tokens holds in group g: every
// block it touches for full attention, at most the window plus one block for a sliding
// window, whatever the context.
func (l KVLayout) blocksInGroup(g LayerGroup, tokens int64) int64 {
	b := int64(l.blockSize)
	n := (tokens + b - 1) / b
	if g.Sliding() {
		if w := (int64(g.Window)+b-1)/b + 1; w < n {
			return w
		}
	}
	return n
}

// BytesPerRequest returns the KV cache one request of tokens tokens holds on one GPU, in
// whole blocks, with sliding windows applied. tokens is clamped to [0, MaxTokens].
func (l KVLayout) BytesPerRequest(tokens int64) int64 {
	return l.requestBytes(tokens, l.perGPU, l.stateGPU)
}

// StateBytesPerRequest returns the Mamba / linear-attention state one request holds on
// one GPU, whatever its length (included in BytesPerRequest): 0 without state groups.
func (l KVLayout) StateBytesPerRequest() int64 { return Bits(l.stateGPU).CeilBytes() }

// ModelBytesPerRequest returns the KV cache one request of tokens tokens holds in the
// whole model, before the tensor-parallel split (so without replicated heads), in whole
// blocks, with sliding windows applied: 10 GiB for Llama 3 70B in fp16 at 32,768 tokens.
func (l KVLayout) ModelBytesPerRequest(tokens int64) int64 {
	return l.requestBytes(tokens, l.whole, l.stateWhole)
}

func (l KVLayout) requestBytes(tokens int64, bitsPerToken []int64, state int64) int64 {
	tokens = clampTokens(tokens)
	bitsTotal := state
	for i, g := range l.model.Groups {
		if !g.State() {
			bitsTotal += l.blocksInGroup(g, tokens) * int64(l.blockSize) * bitsPerToken[i]
		}
	}
	return Bits(bitsTotal).CeilBytes()
}

func clampTokens(t int64) int64 {
	if t < 0 {
		return 0
	}
	if t > MaxTokens {
		return MaxTokens
	}
	return t
}

// MaxConcurrency returns how many requests of tokens tokens fit together in budget bytes
// of KV cache per GPU: 0 when not even one fits, or budget or tokens is not positive.
func (l KVLayout) MaxConcurrency(budget, tokens int64) int64 {
	if budget <= 0 || tokens <= 0 {
		return 0
	}
	return budget / l.BytesPerRequest(tokens)
}

// MaxContext returns the longest context for which one request fits in budget bytes of KV
// cache per GPU, found by binary search over BytesPerRequest. unbounded is true when every
// layer has a sliding window and one request fits whatever its length; tokens is then
// MaxTokens.
func (l KVLayout) MaxContext(budget int64) (tokens int64, unbounded bool) {
	if budget <= 0 {
		return 0, false
	}
	if l.BytesPerRequest(MaxTokens) <= budget {
		// Capped at MaxTokens; unbounded only when no layer keeps every token.
		return MaxTokens, !l.hasFullAttention()
	}
	lo, hi := int64(0), int64(MaxTokens) // fits at lo, not at hi
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if l.BytesPerRequest(mid) <= budget {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, false
}

func (l KVLayout) hasFullAttention() bool {
	for _, g := range l.model.Groups {
		if !g.Sliding() && !g.State() {
			return true
		}
	}
	return false
}
