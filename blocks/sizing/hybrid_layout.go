package sizing

import (
	"fmt"
	"strings"
)

// This file compares memory layouts for hybrid models, whose layers keep different
// things per sequence: full attention (every token), sliding-window and chunked local
// attention (recent tokens), Mamba / linear-attention state (a fixed state). Three
// layouts:
//
//   - LayoutUniform is vLLM's: one page size for every KV-cache group. Layers are split
//     into groups of equal layer count (the smallest count among kinds, or the largest
//     when they differ by less than 1.5x, padding the last group of a kind), and when a
//     state kind is present the attention block is raised until its page holds a state
//     (aligned to 16 tokens), so that attention's block, and with it the prefix-hit
//     granularity, grows to hundreds of tokens.
//   - LayoutPerClass keeps one pool per page-size class: attention in 16-token blocks,
//     each state in a page of its own size, no padding layers. The pools are split ahead
//     of time for a planning context; requests of another length leave one pool short
//     while the other has room.
//   - LayoutCarved (Jenga) carves large pages into each kind's small pages on demand, so
//     the pages are (b)'s and one pool serves every kind.

// Layout names a memory layout of a hybrid model's KV cache.
type Layout string

// The layouts CompareLayouts evaluates.
const (
	LayoutUniform  Layout = "uniform pages (vLLM)"
	LayoutPerClass Layout = "pool per page size"
	LayoutCarved   Layout = "carved pages (Jenga)"
)

// HybridKind is what a run of layers keeps per sequence.
type HybridKind string

// The kinds of HybridLayers.
const (
	KindFull    HybridKind = "full"
	KindSliding HybridKind = "sliding"
	KindChunked HybridKind = "chunked"
	KindState   HybridKind = "state" // Mamba, Gated DeltaNet: conv + recurrent state
)

// HybridLayers is a run of layers of one kind.
type HybridLayers struct {
	Kind   HybridKind
	Layers int
	// Span is the sliding window or the attention chunk, tokens.
	Span int
	// TokenBytes is one token's K and V in one layer (attention kinds).
	TokenBytes int64
	// StateBytes is one sequence's state in one layer (KindState).
	StateBytes int64
}

// HybridModel is a hybrid model's layers, from its published config.json.
type HybridModel struct {
	Name   string
	Source string
	Layers []HybridLayers
}

// attnBytes is 2 (K and V) x heads x head dim x bytes per value.
func attnBytes(kvHeads, headDim, valueBytes int) int64 {
	return 2 * int64(kvHeads) * int64(headDim) * int64(valueBytes)
}

// HybridPresets are the hybrid models of the layout comparison, bf16 KV and state, from
// the config.json each names.
func HybridPresets() []HybridModel {
	gptOSS := func(name string, layers int) HybridModel {
		return HybridModel{Name: name,
			Source: "openai/" + name + " config.json: layer_types alternate sliding_attention (sliding_window 128) and full_attention; 8 KV heads, head_dim 64",
			Layers: []HybridLayers{
				{Kind: KindSliding, Layers: layers / 2, Span: 128, TokenBytes: attnBytes(8, 64, 2)},
				{Kind: KindFull, Layers: layers / 2, TokenBytes: attnBytes(8, 64, 2)},
			}}
	}
	// Mamba (Jamba): d_inner = expand x hidden = 8,192; conv state (d_conv-1) x d_inner,
	// SSM state d_inner x d_state.
	jambaState := int64(8192*(4-1)+8192*16) * 2
	// Gated DeltaNet (Qwen3-Next): conv state (kernel-1) x (2 x 16 x 128 + 32 x 128),
	// recurrent state 32 value heads x 128 x 128.
	qwenState := int64(3*(2*16*128+32*128)+32*128*128) * 2
	return []HybridModel{
		gptOSS("gpt-oss-20b", 24),
		gptOSS("gpt-oss-120b", 36),
		{Name: "gemma-3-27b",
			Source: "google/gemma-3-27b-it config.json (text_config): 62 layers, 5 sliding (window 1,024) to 1 global, 16 KV heads, head_dim 128",
			Layers: []HybridLayers{
				{Kind: KindSliding, Layers: 52, Span: 1024, TokenBytes: attnBytes(16, 128, 2)},
				{Kind: KindFull, Layers: 10, TokenBytes: attnBytes(16, 128, 2)},
			}},
		{Name: "llama-4-scout",
			Source: "meta-llama/Llama-4-Scout-17B-16E config.json (text_config): 48 layers, chunked attention (attention_chunk_size 8,192) with every 4th layer global, 8 KV heads, head_dim 128",
			Layers: []HybridLayers{
				{Kind: KindChunked, Layers: 36, Span: 8192, TokenBytes: attnBytes(8, 128, 2)},
				{Kind: KindFull, Layers: 12, TokenBytes: attnBytes(8, 128, 2)},
			}},
		{Name: "qwen3-next-80b-a3b",
			Source: "Qwen/Qwen3-Next-80B-A3B-Instruct config.json: 48 layers, full_attention_interval 4 (12 gated attention: 2 KV heads, head_dim 256; 36 Gated DeltaNet: 16 key heads, 32 value heads, head dims 128, conv kernel 4)",
			Layers: []HybridLayers{
				{Kind: KindState, Layers: 36, StateBytes: qwenState},
				{Kind: KindFull, Layers: 12, TokenBytes: attnBytes(2, 256, 2)},
			}},
		{Name: "jamba-1.5-mini",
			Source: "ai21labs/AI21-Jamba-1.5-Mini config.json: 32 layers, attn_layer_period 8 (4 attention: 8 KV heads, head_dim 128; 28 Mamba: d_state 16, d_conv 4, expand 2, hidden 4,096)",
			Layers: []HybridLayers{
				{Kind: KindState, Layers: 28, StateBytes: jambaState},
				{Kind: KindFull, Layers: 4, TokenBytes: attnBytes(8, 128, 2)},
			}},
	}
}

// LayoutRow is one layout's figures for one model at one context.
type LayoutRow struct {
	Layout Layout
	// BlockTokens is attention's tokens per block, and so the prefix-hit granularity.
	BlockTokens int
	// PaddingLayers is the layer slots vLLM's grouping pads (uniform layout only).
	PaddingLayers int
	// RequestBytes is the memory one sequence at the context holds; UsefulBytes what it
	// needs (the tokens each layer still attends to, or its state).
	RequestBytes, UsefulBytes int64
	// Concurrency is how many such sequences the budget holds.
	Concurrency int64
}

// Waste is the share of a sequence's memory it does not need.
func (r LayoutRow) Waste() float64 {
	if r.RequestBytes == 0 {
		return 0
	}
	return 1 - float64(r.UsefulBytes)/float64(r.RequestBytes)
}

// heldBlocks is how many blocks of bs tokens a layer of kind k holds for a sequence whose
// tokens tokens all have slots, the last being computed (vLLM's rule: blocks wholly
// outside the window, or before the chunk, of the last token are released).
func heldBlocks(k HybridLayers, tokens, bs int64) int64 {
	all := (tokens + bs - 1) / bs
	switch k.Kind {
	case KindSliding:
		return all - max(0, tokens-int64(k.Span))/bs
	case KindChunked:
		return all - (tokens-1)/int64(k.Span)*int64(k.Span)/bs
	case KindState:
		return 1
	}
	return all
}

// usefulBytes is what one layer of k needs for that sequence: the tokens the last one
// attends to (itself included), or the state.
func usefulBytes(k HybridLayers, tokens int64) int64 {
	switch k.Kind {
	case KindSliding:
		return min(tokens, int64(k.Span)) * k.TokenBytes
	case KindChunked:
		return (tokens - (tokens-1)/int64(k.Span)*int64(k.Span)) * k.TokenBytes
	case KindState:
		return k.StateBytes
	}
	return tokens * k.TokenBytes
}

// CompareLayouts evaluates the three layouts for m with sequences of tokens tokens and
// budget bytes of KV memory; the per-class pools are split for sequences of planTokens.
func CompareLayouts(m HybridModel, tokens, planTokens, budget int64) ([]LayoutRow, error) {
	if tokens <= 0 || planTokens <= 0 || budget <= 0 || tokens > MaxTokens || planTokens > MaxTokens {
		return nil, invalidf("layouts: tokens %d, plan %d, budget %d", tokens, planTokens, budget)
	}
	if len(m.Layers) == 0 {
		return nil, invalidf("layouts: %s has no layers", m.Name)
	}
	var useful int64
	for _, k := range m.Layers {
		if k.Layers <= 0 || (k.Kind == KindState) == (k.StateBytes <= 0) || (k.Kind != KindState && k.TokenBytes <= 0) {
			return nil, invalidf("layouts: %s: bad layers %+v", m.Name, k)
		}
		useful += int64(k.Layers) * usefulBytes(k, tokens)
	}
	const bs = 16
	rows := []LayoutRow{uniformRow(m, tokens, budget, useful)}

	// Per class and carved: natural pages, one group per kind, no padding.
	var perRequest, plan int64
	perKind := make([]int64, len(m.Layers))
	planKind := make([]int64, len(m.Layers))
	for i, k := range m.Layers {
		page := bs * k.TokenBytes
		if k.Kind == KindState {
			page = k.StateBytes
		}
		perKind[i] = int64(k.Layers) * heldBlocks(k, tokens, bs) * page
		planKind[i] = int64(k.Layers) * heldBlocks(k, planTokens, bs) * page
		perRequest += perKind[i]
		plan += planKind[i]
	}
	// Pools split for the planning context: each kind's pool gets its share of the budget.
	conc := int64(-1)
	for i := range m.Layers {
		pool := int64(float64(budget) * float64(planKind[i]) / float64(plan))
		if c := pool / perKind[i]; conc < 0 || c < conc {
			conc = c
		}
	}
	rows = append(rows,
		LayoutRow{Layout: LayoutPerClass, BlockTokens: bs, RequestBytes: perRequest, UsefulBytes: useful, Concurrency: conc},
		LayoutRow{Layout: LayoutCarved, BlockTokens: bs, RequestBytes: perRequest, UsefulBytes: useful, Concurrency: budget / perRequest})
	return rows, nil
}

// uniformRow is vLLM's layout: equal-size groups, one page size.
func uniformRow(m HybridModel, tokens, budget, useful int64) LayoutRow {
	minL, maxL := m.Layers[0].Layers, m.Layers[0].Layers
	for _, k := range m.Layers {
		minL, maxL = min(minL, k.Layers), max(maxL, k.Layers)
	}
	group := minL
	if float64(maxL) < float64(minL)*1.5 {
		group = maxL
	}
	// Attention's block: 16 tokens, raised (in steps of 16) until a page holds a state.
	var tokenBytes, stateBytes int64
	for _, k := range m.Layers {
		if k.Kind == KindState {
			stateBytes = max(stateBytes, k.StateBytes)
		} else {
			tokenBytes = max(tokenBytes, k.TokenBytes)
		}
	}
	bs := int64(16)
	if stateBytes > 0 && tokenBytes > 0 {
		bs = 16 * ((stateBytes + 16*tokenBytes - 1) / (16 * tokenBytes))
	}
	page := max(bs*tokenBytes, stateBytes) // per layer slot
	var perRequest int64
	padding := 0
	for _, k := range m.Layers {
		groups := (k.Layers + group - 1) / group
		padding += groups*group - k.Layers
		perRequest += int64(groups) * heldBlocks(k, tokens, bs) * int64(group) * page
	}
	return LayoutRow{Layout: LayoutUniform, BlockTokens: int(bs), PaddingLayers: padding,
		RequestBytes: perRequest, UsefulBytes: useful, Concurrency: budget / perRequest}
}

// LayoutTable renders CompareLayouts for every model and context as a Markdown table.
func LayoutTable(models []HybridModel, contexts []int64, planTokens, budget int64) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "| model | context | layout | attention block (hit unit), tokens | padding layers | MiB per sequence | waste | sequences in %d GiB |\n", budget>>30)
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, m := range models {
		for _, t := range contexts {
			rows, err := CompareLayouts(m, t, planTokens, budget)
			if err != nil {
				return "", err
			}
			for _, r := range rows {
				fmt.Fprintf(&b, "| %s | %d | %s | %d | %d | %.1f | %.1f%% | %d |\n", m.Name, t, r.Layout,
					r.BlockTokens, r.PaddingLayers, float64(r.RequestBytes)/(1<<20), 100*r.Waste(), r.Concurrency)
			}
		}
	}
	return b.String(), nil
}
