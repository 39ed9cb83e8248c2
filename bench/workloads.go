package bench

// Parameters of the reference workloads, from ../shared/workloads.md.
const (
	// Seed seeds every reference workload's generator.
	Seed = 42
	// BlockSize is the tokens per block in every reference workload.
	BlockSize = 16

	// W1PoolBlocks is W1's pool size; W1Batch the blocks allocated then freed per iteration.
	W1PoolBlocks = 65536
	W1Batch      = 256

	// W2PromptTokens is the length of W2's prompt (256 full blocks).
	W2PromptTokens = 4096

	// W3PoolBlocks is W3's pool, the null block included (8,191 usable).
	W3PoolBlocks = 8192
	// W3SystemPrompts system prompts of W3SystemTokens tokens each.
	W3SystemPrompts = 32
	W3SystemTokens  = 2048
	// W3Requests requests, each with W3UniqueTokens own prompt tokens and W3OutputTokens outputs.
	W3Requests     = 20000
	W3UniqueTokens = 512
	W3OutputTokens = 128
	// W3ZipfS is the Zipf exponent of the system-prompt choice.
	W3ZipfS = 1.1

	// W4Window is the sliding window, in tokens, of W4's second KV-cache group (W4 is W3's
	// trace on a full-attention group plus this sliding-window group, in one pool).
	W4Window = 128
	// W4HitTokens and W4Evictions are W4's check values, from vLLM v1's own hybrid
	// KVCacheManager: hit rate 0.6763171875.
	W4HitTokens = 34627440
	W4Evictions = 2383379
)

// W4FirstHits are the hits, in tokens, of W4's first eight requests (check values).
var W4FirstHits = []int{0, 2048, 0, 0, 0, 2048, 0, 0}

// W2Prompt returns W2's prompt: the first 4,096 tokens of a fresh generator.
func W2Prompt() []int32 {
	r := NewSplitMix64(Seed)
	p := make([]int32, W2PromptTokens)
	for i := range p {
		p[i] = r.Token()
	}
	return p
}

// W3Request is one request of the W3 trace.
type W3Request struct {
	// Choice is the index of the system prompt.
	Choice int
	// Prompt is the system prompt followed by the request's unique tokens (2,560 tokens).
	// Its first 2,048 tokens share memory with the trace's system prompt.
	Prompt []int32
	// Output holds the 128 output tokens, appended one at a time.
	Output []int32
}

// W3Trace is W3's whole trace, generated before timing.
type W3Trace struct {
	System   [][]int32
	Requests []W3Request
}

// NewW3Trace generates W3 exactly as ../shared/workloads.md defines it.
func NewW3Trace() *W3Trace {
	r := NewSplitMix64(Seed)
	t := &W3Trace{System: make([][]int32, W3SystemPrompts), Requests: make([]W3Request, W3Requests)}
	for i := range t.System {
		t.System[i] = make([]int32, W3SystemTokens)
		for j := range t.System[i] {
			t.System[i][j] = r.Token()
		}
	}
	z := NewZipf(W3SystemPrompts, W3ZipfS)
	for i := range t.Requests {
		c := z.Draw(r)
		prompt := make([]int32, W3SystemTokens+W3UniqueTokens)
		copy(prompt, t.System[c])
		for j := W3SystemTokens; j < len(prompt); j++ {
			prompt[j] = r.Token()
		}
		out := make([]int32, W3OutputTokens)
		for j := range out {
			out[j] = r.Token()
		}
		t.Requests[i] = W3Request{Choice: c, Prompt: prompt, Output: out}
	}
	return t
}
