package prefix

import (
	"fmt"
	"math"
)

// MMKeyForm says how a multimodal input enters the extra keys of the blocks it overlaps,
// following the two forms vLLM has used. It changes equality (which blocks match) and
// every block hash of blocks with multimodal inputs; text, LoRA and salt blocks are the
// same in both forms.
type MMKeyForm uint8

const (
	// MMKeyIdentifier keys an input by its identifier (MMInput.Hash) alone: vLLM before
	// March 2026. Blocks of identical placeholder tokens that one input covers at
	// different positions are the same block. The default.
	MMKeyIdentifier MMKeyForm = iota
	// MMKeyIdentifierOffset keys an input by the pair (identifier, offset), the offset being
	// where the input starts relative to the block's first token (negative when it
	// started in an earlier block): vLLM's _gen_mm_extra_hash_keys since March 2026.
	MMKeyIdentifierOffset
)

// String returns "identifier" or "identifier+offset".
func (f MMKeyForm) String() string {
	switch f {
	case MMKeyIdentifier:
		return "identifier"
	case MMKeyIdentifierOffset:
		return "identifier+offset"
	}
	return fmt.Sprintf("MMKeyForm(%d)", uint8(f))
}

// WithMMKeyForm sets how multimodal inputs key the blocks they overlap (default
// MMKeyIdentifier). Use the form of the vLLM version whose hashes and hits the index
// must reproduce; New rejects an unknown form with ErrInvalidArgument.
func WithMMKeyForm(f MMKeyForm) Option { return func(c *config) { c.mmForm = f } }

// mmKey is one multimodal extra key of a block as the index keeps it: the input's
// identifier and, in the (identifier, offset) form, its start relative to the block's
// first token (always 0 in the identifier form, so that equality is the identifier's).
type mmKey struct {
	id  string
	off int
}

// mmValid reports whether multimodal inputs are what blockMM assumes: sorted by Offset,
// with non-negative offsets and lengths whose sum does not overflow. Out of order, or
// with a wrapping end, an input would be skipped for blocks it overlaps, and those blocks
// would match another prompt's with a different image.
func mmValid(mm []MMInput) bool {
	prev := 0
	for _, m := range mm {
		if m.Offset < prev || m.Length < 0 || m.Length > math.MaxInt-m.Offset {
			return false
		}
		prev = m.Offset
	}
	return true
}

// blockMM returns the keys of the multimodal inputs that overlap block b of p, in Offset
// order, or nil. The slice is scratch, valid until the next call. lo remembers the first
// input that may still overlap, so a whole prompt costs O(blocks + inputs).
func (x *Index) blockMM(p *Prompt, b int, lo *int) []mmKey {
	if len(p.MM) == 0 {
		return nil
	}
	s, e := b*x.bs, (b+1)*x.bs
	for *lo < len(p.MM) && p.MM[*lo].Offset+p.MM[*lo].Length <= s {
		*lo++
	}
	pairs := x.cfg.mmForm == MMKeyIdentifierOffset
	buf := x.mmBuf[:0]
	for j := *lo; j < len(p.MM) && p.MM[j].Offset < e; j++ {
		if m := p.MM[j]; m.Length > 0 && m.Offset+m.Length > s {
			k := mmKey{id: m.Hash}
			if pairs {
				k.off = m.Offset - s
			}
			buf = append(buf, k)
		}
	}
	x.mmBuf = buf
	if len(buf) == 0 {
		return nil
	}
	return buf
}

// mmEqual reports whether block node n carries exactly the multimodal keys mm.
func (x *Index) mmEqual(n int32, mm []mmKey) bool {
	if x.nodes[n].flags&flagMM == 0 {
		return len(mm) == 0
	}
	have := x.mm[n]
	if len(have) != len(mm) {
		return false
	}
	for i := range have {
		if have[i] != mm[i] {
			return false
		}
	}
	return true
}

// mixMM folds a block's multimodal keys into its key: each identifier, and in the
// (identifier, offset) form each offset after it. The identifier form mixes what it
// always did, so its keys and Fast64 hashes are unchanged.
func (x *Index) mixMM(h uint64, mm []mmKey) uint64 {
	pairs := x.cfg.mmForm == MMKeyIdentifierOffset
	for _, m := range mm {
		h = mixExtra(h, tagMM, hashString(m.id))
		if pairs {
			h = mixExtra(h, tagMMOffset, uint64(m.off))
		}
	}
	return h
}

// extraOf returns the Extra of a block in namespace ns with multimodal keys mm (the salt
// when first), for a Hasher. Its slices are scratch, valid until the next call.
func (x *Index) extraOf(ns Namespace, first bool, mm []mmKey) Extra {
	e := Extra{LoRA: ns.LoRA}
	if first {
		e.Salt = ns.Salt
	}
	if len(mm) == 0 {
		return e
	}
	ids := x.mmIDs[:0]
	for _, m := range mm {
		ids = append(ids, m.id)
	}
	x.mmIDs, e.MM = ids, ids
	if x.cfg.mmForm == MMKeyIdentifierOffset {
		offs := x.mmOffs[:0]
		for _, m := range mm {
			offs = append(offs, m.off)
		}
		x.mmOffs, e.MMOffsets = offs, offs
	}
	return e
}
