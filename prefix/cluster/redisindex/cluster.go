package redisindex

import (
	"context"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
)

var _ cluster.Index = (*Index)(nil)

// PromptKeys appends to dst the request keys of p's full blocks (at most MaxLookupBlocks)
// as Apply keys the blocks vLLM's (or kvpage's) events describe: under the LoRA name as
// the model when there is one, each block chained with its extra keys in vLLM's order
// (LoRA name, overlapping multimodal hashes, the salt on block 0), since llm-d reads every
// string extra key as a multimodal identifier.
func (x *Index) PromptKeys(dst []uint64, p *prefix.Prompt) []uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.appendKeys(dst, promptModel(x, p), p, 0, x.lookupBlocks(p), 0)
}

// promptModel is the model p's request keys are chained under.
func promptModel(x *Index, p *prefix.Prompt) string {
	if p.Namespace.LoRA != "" {
		return p.Namespace.LoRA
	}
	return x.cfg.Model
}

// lookupBlocks is how many of p's blocks a lookup covers.
func (x *Index) lookupBlocks(p *prefix.Prompt) int {
	return min(len(p.Tokens)/x.cfg.BlockSize, x.cfg.MaxLookupBlocks)
}

// appendKeys appends to dst the request keys of p's blocks [from, to) under model,
// chained from parent, the key of block from-1 (unused when from is 0: the model's root).
// Under x.mu (the hasher's buffer).
func (x *Index) appendKeys(dst []uint64, model string, p *prefix.Prompt, from, to int, parent uint64) []uint64 {
	bs := x.cfg.BlockSize
	if from == 0 {
		parent = x.keys.Root(model)
	}
	var ids []string
	for i := from; i < to; i++ {
		start, end := i*bs, (i+1)*bs
		ids = ids[:0]
		if p.Namespace.LoRA != "" {
			ids = append(ids, p.Namespace.LoRA)
		}
		for _, in := range p.MM {
			if start < in.Offset+in.Length && in.Offset < end {
				ids = append(ids, in.Hash)
			}
		}
		if i == 0 && p.Namespace.Salt != "" {
			ids = append(ids, p.Namespace.Salt)
		}
		parent = x.keys.Block(parent, p.Tokens[start:end], ids)
		dst = append(dst, parent)
	}
	return dst
}

// MatchPrompt is Match with the caller's context, returning tiers too.
func (x *Index) MatchPrompt(ctx context.Context, dst []Hit, p *prefix.Prompt) ([]Hit, error) {
	per, err := x.lookupStaged(ctx, promptModel(x, p), p)
	if err != nil {
		return dst, err
	}
	return appendHits(dst, per), nil
}

// Match implements cluster.Index: every server's hit for p, the most blocks first, ties
// by name. The servers are those holding p's first block and those Seen and not swept
// (with 0 blocks when they hold none).
func (x *Index) Match(dst []cluster.ServerHit, p *prefix.Prompt) ([]cluster.ServerHit, error) {
	hits, err := x.MatchPrompt(context.Background(), nil, p)
	if err != nil {
		return dst, err
	}
	for _, h := range hits {
		dst = append(dst, cluster.ServerHit{Server: h.Server, Blocks: h.Blocks})
	}
	x.mu.Lock()
	var idle []string
	for s := range x.seen {
		if !hitsHave(hits, s) {
			idle = append(idle, s)
		}
	}
	x.mu.Unlock()
	sortStrings(idle)
	for _, s := range idle {
		dst = append(dst, cluster.ServerHit{Server: s})
	}
	return dst, nil
}

func hitsHave(hits []Hit, s string) bool {
	for _, h := range hits {
		if h.Server == s {
			return true
		}
	}
	return false
}
