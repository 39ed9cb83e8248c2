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

// HybridPresets are the hybrid models of the layout comparison: the presets of
// presets/models.json marked hybrid (gpt-oss-20b and -120b, Gemma 3 27B, Llama 4 Scout,
// Qwen3-Next-80B-A3B, Jamba 1.5 Mini), each read from its published config.json by
// ParseHFConfig, KV cache and state in bf16.
func HybridPresets() []HybridModel {
	t := loadPresets()
	out := make([]HybridModel, 0, len(t.hybrid))
	for _, i := range t.hybrid {
		h, err := t.models[i].Hybrid(BF16)
		if err != nil {
			panic("kvpage: broken embedded preset: " + err.Error()) // checked when loaded
		}
		out = append(out, h)
	}
	return out
}

// Hybrid describes m for the layout comparison: one HybridLayers per layer group, its
// attention in cache data type d, its state in the data type the model runs in whatever d
// is (ModelSpec.ServingDType, as vLLM resolves it), whole-model
// figures (no tensor-parallel split): HybridOnGPU(d, 1).
func (m ModelSpec) Hybrid(d DType) (HybridModel, error) { return m.HybridOnGPU(d, 1) }

// HybridOnGPU is Hybrid on one GPU of tp: each layer's KV heads divided across the GPUs,
// or replicated when there are fewer heads than GPUs, an MLA latent replicated, a state
// split tp ways (rounded up), as NewKVLayout lays them out; tp must divide the heads as
// NewKVLayout requires.
func (m ModelSpec) HybridOnGPU(d DType, tp int) (HybridModel, error) {
	if _, err := NewKVLayout(m, d, tp, DefaultBlockSize); err != nil {
		return HybridModel{}, err
	}
	sd := m.ServingDType()
	h := HybridModel{Name: m.Name, Source: m.Source}
	for _, g := range m.Groups {
		l := HybridLayers{Layers: g.Layers, Span: g.Window}
		switch {
		case g.State():
			l.Kind, l.StateBytes = KindState, Bits(g.stateBits(sd, tp)/int64(g.Layers)).CeilBytes()
		case g.Chunked:
			l.Kind = KindChunked
		case g.Sliding():
			l.Kind = KindSliding
		default:
			l.Kind = KindFull
		}
		if !g.State() {
			l.TokenBytes = Bits(g.bitsPerToken(d, tp) / int64(g.Layers)).CeilBytes()
		}
		h.Layers = append(h.Layers, l)
	}
	return h, nil
}

// LayoutRow is one layout's figures for one model at one context.
type LayoutRow struct {
	Layout Layout
	// BlockTokens is attention's tokens per block, and so the prefix-hit granularity.
	BlockTokens int
	// PaddingLayers is the layer slots vLLM's grouping pads (uniform layout only).
	PaddingLayers int
	// Blocks is the block IDs one sequence at the context holds, summed over its
	// KV-cache groups (a block ID spans its group's layers).
	Blocks int64
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
	var perRequest, plan, seqBlocks int64
	perKind := make([]int64, len(m.Layers))
	planKind := make([]int64, len(m.Layers))
	for i, k := range m.Layers {
		page := bs * k.TokenBytes
		if k.Kind == KindState {
			page = k.StateBytes
		}
		seqBlocks += heldBlocks(k, tokens, bs)
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
		LayoutRow{Layout: LayoutPerClass, BlockTokens: bs, Blocks: seqBlocks, RequestBytes: perRequest, UsefulBytes: useful, Concurrency: conc},
		LayoutRow{Layout: LayoutCarved, BlockTokens: bs, Blocks: seqBlocks, RequestBytes: perRequest, UsefulBytes: useful, Concurrency: budget / perRequest})
	return rows, nil
}

// UniformPages is vLLM's uniform layout of a hybrid model: layers split into KV-cache
// groups of GroupLayers layers each (the last group of a kind padded), every group's
// block BlockTokens tokens and every layer's page PageBytes.
type UniformPages struct {
	GroupLayers int
	BlockTokens int
	PageBytes   int64 // per layer slot; a block ID spans GroupLayers of them
}

// Uniform returns vLLM's uniform layout of m: the group size is the smallest layer
// count among m's kinds, or the largest when they differ by less than 1.5x; attention's
// block is 16 tokens, raised in steps of 16 until a page holds the largest state.
func (m HybridModel) Uniform() UniformPages {
	minL, maxL := m.Layers[0].Layers, m.Layers[0].Layers
	for _, k := range m.Layers {
		minL, maxL = min(minL, k.Layers), max(maxL, k.Layers)
	}
	group := minL
	if float64(maxL) < float64(minL)*1.5 {
		group = maxL
	}
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
	return UniformPages{GroupLayers: group, BlockTokens: int(bs), PageBytes: max(bs*tokenBytes, stateBytes)}
}

// uniformRow is vLLM's layout: equal-size groups, one page size.
func uniformRow(m HybridModel, tokens, budget, useful int64) LayoutRow {
	u := m.Uniform()
	group, bs, page := u.GroupLayers, int64(u.BlockTokens), u.PageBytes
	var perRequest, seqBlocks int64
	padding := 0
	for _, k := range m.Layers {
		groups := (k.Layers + group - 1) / group
		padding += groups*group - k.Layers
		seqBlocks += int64(groups) * heldBlocks(k, tokens, bs)
		perRequest += int64(groups) * heldBlocks(k, tokens, bs) * int64(group) * page
	}
	return LayoutRow{Layout: LayoutUniform, BlockTokens: int(bs), PaddingLayers: padding, Blocks: seqBlocks,
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
