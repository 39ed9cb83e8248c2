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
	model := x.cfg.Model
	if p.Namespace.LoRA != "" {
		model = p.Namespace.LoRA
	}
	bs := x.cfg.BlockSize
	n := min(len(p.Tokens)/bs, x.cfg.MaxLookupBlocks)
	var ids []string
	x.mu.Lock()
	defer x.mu.Unlock()
	parent := x.keys.Root(model)
	for i := range n {
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
	per, err := x.Lookup(ctx, x.PromptKeys(nil, p), nil)
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
