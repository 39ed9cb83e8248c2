package vllmhash

import "github.com/kvpage/kvpage/prefix"

// BlockExtra returns the extra keys of block i of p, for blocks of blockSize tokens, in
// vLLM's order: the namespace's LoRA name, the hashes of p's multimodal inputs that
// overlap the block (block [s, e) overlaps input [o, o+n) when s < o+n and o < e), and
// the salt on block 0 only. The multimodal hashes are appended to mm[:0], so a caller that
// passes the same scratch slice each time allocates nothing once it is large enough.
func BlockExtra(p *prefix.Prompt, i, blockSize int, mm []string) prefix.Extra {
	start, end := i*blockSize, (i+1)*blockSize
	mm = mm[:0]
	for _, in := range p.MM {
		if start < in.Offset+in.Length && in.Offset < end {
			mm = append(mm, in.Hash)
		}
	}
	e := prefix.Extra{LoRA: p.Namespace.LoRA, MM: mm} // empty, not nil, when none overlaps
	if i == 0 {
		e.Salt = p.Namespace.Salt
	}
	return e
}

// PromptHashes returns the chained hashes of p's full blocks (a partial last block has
// none), computed with h from h's root. It allocates its result; it is meant for tools and
// tests, not hot paths.
func PromptHashes(h prefix.Hasher, p *prefix.Prompt, blockSize int) [][]byte {
	n := len(p.Tokens) / blockSize
	out := make([][]byte, n)
	parent := make([]byte, h.Size())
	h.Root(parent)
	var mm []string
	for i := range n {
		e := BlockExtra(p, i, blockSize, mm)
		mm = e.MM[:0]
		out[i] = make([]byte, h.Size())
		h.Block(out[i], parent, p.Tokens[i*blockSize:(i+1)*blockSize], e)
		parent = out[i]
	}
	return out
}
