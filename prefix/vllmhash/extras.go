package vllmhash

import "github.com/kvpage/kvpage/prefix"

// BlockExtra returns the extra keys of block i of p, for blocks of blockSize tokens, in
// vLLM's order and in the identifier form (vLLM before March 2026): the namespace's LoRA
// name, the hashes of p's multimodal inputs that overlap the block (block [s, e) overlaps
// input [o, o+n) when s < o+n and o < e), and the salt on block 0 only. The multimodal
// hashes are appended to mm[:0], so a caller that passes the same scratch slice each time
// allocates nothing once it is large enough.
func BlockExtra(p *prefix.Prompt, i, blockSize int, mm []string) prefix.Extra {
	return BlockExtraForm(p, i, blockSize, prefix.MMKeyIdentifier, mm, nil)
}

// BlockExtraForm is BlockExtra in either multimodal key form. With
// prefix.MMKeyIdentifierOffset each overlapping input also gets its offset, o - s (negative
// when the input began in an earlier block), appended to offs[:0] and returned in
// MMOffsets, as vLLM's _gen_mm_extra_hash_keys pairs them; offs is unused otherwise.
// MMOffsets is nil when no input overlaps the block, so a caller reusing scratch keeps its
// own offs then.
func BlockExtraForm(p *prefix.Prompt, i, blockSize int, form prefix.MMKeyForm, mm []string, offs []int) prefix.Extra {
	start, end := i*blockSize, (i+1)*blockSize
	pairs := form == prefix.MMKeyIdentifierOffset
	mm, offs = mm[:0], offs[:0]
	for _, in := range p.MM {
		if start < in.Offset+in.Length && in.Offset < end {
			mm = append(mm, in.Hash)
			if pairs {
				offs = append(offs, in.Offset-start)
			}
		}
	}
	e := prefix.Extra{LoRA: p.Namespace.LoRA, MM: mm} // empty, not nil, when none overlaps
	if pairs && len(mm) > 0 {
		e.MMOffsets = offs // one offset per key, so not nil
	}
	if i == 0 {
		e.Salt = p.Namespace.Salt
	}
	return e
}

// PromptHashes returns the chained hashes of p's full blocks (a partial last block has
// none), computed with h from h's root, in the identifier form. It allocates its result;
// it is meant for tools and tests, not hot paths.
func PromptHashes(h prefix.Hasher, p *prefix.Prompt, blockSize int) [][]byte {
	return PromptHashesForm(h, p, blockSize, prefix.MMKeyIdentifier)
}

// PromptHashesForm is PromptHashes in either multimodal key form.
func PromptHashesForm(h prefix.Hasher, p *prefix.Prompt, blockSize int, form prefix.MMKeyForm) [][]byte {
	n := len(p.Tokens) / blockSize
	out := make([][]byte, n)
	parent := make([]byte, h.Size())
	h.Root(parent)
	var mm []string
	var offs []int
	for i := range n {
		e := BlockExtraForm(p, i, blockSize, form, mm, offs)
		mm = e.MM[:0]
		if e.MMOffsets != nil { // nil for a block without inputs: keep the scratch
			offs = e.MMOffsets[:0]
		}
		out[i] = make([]byte, h.Size())
		h.Block(out[i], parent, p.Tokens[i*blockSize:(i+1)*blockSize], e)
		parent = out[i]
	}
	return out
}
