package prefix

import (
	"unsafe"

	"github.com/kvpage/kvpage/blocks"
)

// HitLimit says whether a match may cover the whole prompt: pass WholePrompt or LeaveOne.
type HitLimit bool

const (
	// WholePrompt lets a match cover every full block of the prompt.
	WholePrompt HitLimit = false
	// LeaveOne caps a match so that at least one prompt token is left to compute, as vLLM
	// caps it at len-1: the model needs the last prompt token's logits.
	LeaveOne HitLimit = true
)

// Peek appends to dst the cached blocks of the longest cached prefix of p, in full blocks,
// and returns dst. It takes no references, touches nothing and counts nothing. limit says
// whether the hit may cover the whole prompt (WholePrompt) or must leave a token to compute
// (LeaveOne). The returned Cursor sits at the end of the match; it is the zero Cursor when
// p's namespace has no root (nothing of it is cached), which Commit takes as the
// namespace's root.
//
// Looking up and counting are apart, as in vLLM (the cache's find_longest_cache_hit
// counts nothing; the manager records the lookup): a scheduler may look a request up
// several times (a dry run before admission, a retry after running out of memory) and
// counts it once, with RecordLookup, when it is admitted.
//
// Peek compares every matched block's tokens (and extra keys) with the prompt's. Along the
// path requests share it tries each node's hint child first and needs nothing else; where
// the prompt leaves the hinted child, and for blocks with multimodal inputs, it also hashes
// the block and probes the child table. It allocates nothing when dst has room.
func (x *Index) Peek(dst []blocks.ID, p *Prompt, limit HitLimit) ([]blocks.ID, Cursor) {
	if x.cfg.requireNS && p.Namespace == (Namespace{}) {
		return dst, Cursor{}
	}
	if len(p.MM) > 0 && !mmValid(p.MM) {
		return dst, Cursor{} // a block's extra keys would be wrong: no hit rather than a false one
	}
	r := x.rootOf(p.Namespace)
	if r == 0 {
		return dst, Cursor{}
	}
	n := len(p.Tokens)
	if limit == LeaveOne {
		n--
	}
	full := n / x.bs
	ri := x.root(r)
	cur := r
	matched := 0
	if len(p.MM) == 0 {
		if x.bs == 16 {
			dst, cur, matched = x.matchText16(dst, p.Tokens, r, ri, full)
		} else {
			dst, cur, matched = x.matchText(dst, p.Tokens, r, ri, full)
		}
		return dst, Cursor{node: cur, blocks: int32(matched), gen: x.nodes[cur].gen, root: r}
	}
	// With multimodal inputs: a block without any still tries the hint (hints are text-only
	// children, so equal tokens under the same parent are the one right child); a block with
	// some is hashed with its extra keys and looked up in the table.
	mmLo := 0
	for b := 0; b < full; b++ {
		toks := p.Tokens[b*x.bs : (b+1)*x.bs : (b+1)*x.bs]
		mm := x.blockMM(p, b, &mmLo)
		c := int32(0)
		if h := x.nodes[cur].hint; mm == nil && h != 0 && sameTokens(x.blockTokens(h), toks) {
			c = h
		} else {
			c = x.findChild(cur, x.childKey(x.nodes[cur].key, toks, ri, b == 0, mm), toks, mm)
		}
		if c == 0 {
			break
		}
		dst = append(dst, blockOf(c))
		cur = c
		matched++
	}
	return dst, Cursor{node: cur, blocks: int32(matched), gen: x.nodes[cur].gen, root: r}
}

// RecordLookup counts in Stats one lookup of p that matched up to c: one lookup,
// len(p.Tokens) looked-up tokens and c.Blocks() full blocks of hit tokens. Call it once
// per admitted request, with the Cursor that Peek returned for p, before moving it with
// Commit; RecordResumedLookup instead for a preempted request admitted again.
func (x *Index) RecordLookup(p *Prompt, c Cursor) {
	x.stats.lookups++
	if p != nil {
		x.stats.lookedUp += uint64(len(p.Tokens))
	}
	x.stats.hitTokens += uint64(max(c.blocks, 0)) * uint64(x.bs)
}

// matchText is Peek's loop for prompts without multimodal inputs: the common case. Each
// block first tries the node's hint child (see Index.nodes) with one token comparison and
// no hash; only where the hint is missing or wrong and the node has other children does it
// hash the block and probe the child table (nextByKey).
func (x *Index) matchText(dst []blocks.ID, tokens []int32, r int32, ri *rootInfo, full int) ([]blocks.ID, int32, int) {
	bs, nodes := x.bs, x.nodes
	cur := r
	for b := 0; b < full; b++ {
		toks := tokens[b*bs : (b+1)*bs : (b+1)*bs]
		c := nodes[cur].hint
		if c != 0 {
			if sameTokens(x.blockTokens(c), toks) {
				dst = append(dst, blockOf(c))
				cur = c
				continue
			}
		}
		if c = x.nextByKey(cur, c, toks, ri, b == 0); c == 0 {
			return dst, cur, b
		}
		dst = append(dst, blockOf(c))
		cur = c
	}
	return dst, cur, full
}

// matchText16 is matchText for blocks of 16 tokens, with the token comparison (same16)
// written out in the loop: along a shared path a block costs one load of the hint, eight
// 64-bit compares and the append.
func (x *Index) matchText16(dst []blocks.ID, tokens []int32, r int32, ri *rootInfo, full int) ([]blocks.ID, int32, int) {
	if full <= 0 {
		return dst, r, 0
	}
	nodes := x.nodes
	// The prompt's first full blocks, one array each (full*16 <= len(tokens), checked
	// here): the loop indexes them with no bounds check and no slicing.
	prompt := unsafe.Slice((*[16]int32)(tokens[:full*16]), full)
	cur := r
	for b := range prompt {
		t := &prompt[b]
		c := nodes[cur].hint
		if c != 0 {
			o := &nodes[c].tok
			if (pair(o[0], o[1])^pair(t[0], t[1]))|(pair(o[2], o[3])^pair(t[2], t[3]))|
				(pair(o[4], o[5])^pair(t[4], t[5]))|(pair(o[6], o[7])^pair(t[6], t[7]))|
				(pair(o[8], o[9])^pair(t[8], t[9]))|(pair(o[10], o[11])^pair(t[10], t[11]))|
				(pair(o[12], o[13])^pair(t[12], t[13]))|(pair(o[14], o[15])^pair(t[14], t[15])) == 0 {
				dst = append(dst, blockOf(c))
				cur = c
				continue
			}
		}
		if c = x.nextByKey16(cur, c, t, ri, b == 0); c == 0 {
			return dst, cur, b
		}
		dst = append(dst, blockOf(c))
		cur = c
	}
	return dst, cur, full
}

// nextByKey finds the text-only child of cur holding toks through the child table, after
// the hint child tried (0 if cur has no hint) did not hold them. A node whose only child
// is the hint has nothing else to offer, so the common miss costs no hash either.
func (x *Index) nextByKey(cur, tried int32, toks []int32, ri *rootInfo, first bool) int32 {
	kids := x.nodes[cur].children
	if kids == 0 || (kids == 1 && tried != 0) {
		return 0
	}
	return x.probeChild(cur, x.childKey(x.nodes[cur].key, toks, ri, first, nil), toks, nil)
}

// nextByKey16 is nextByKey for blocks of 16 tokens, with the hash and the token comparison
// written out so that a prompt whose hints are wrong (it leaves, at every node, the child
// requests last reused) costs about what a lookup cost before hints existed.
func (x *Index) nextByKey16(cur, tried int32, toks *[16]int32, ri *rootInfo, first bool) int32 {
	nodes, tab := x.nodes, &x.table
	pn := &nodes[cur]
	if pn.children == 0 || (pn.children == 1 && tried != 0) {
		return 0
	}
	k := x.key16(pn.key, toks, ri, first)
	tag := keyTag(k)
	for i := tab.home(tag); ; i = tab.step(i) {
		s := tab.slots[i]
		if s.n == 0 {
			return 0
		}
		if s.tag != tag {
			continue
		}
		nd := &nodes[s.n]
		if nd.key == k && nd.parent == cur && nd.flags&flagMM == 0 &&
			same16(&nd.tok, toks) {
			return s.n
		}
	}
}

// key16 is childKey for a block of 16 tokens without multimodal inputs, written out.
func (x *Index) key16(parent uint64, toks *[16]int32, ri *rootInfo, first bool) uint64 {
	k := chain(parent, content16(toks, &x.sec), &x.sec)
	if ri.hasLo {
		k = mixExtra(k, tagLoRA, ri.lora)
	}
	if first && ri.hasSa {
		k = mixExtra(k, tagSalt, ri.salt)
	}
	return k & x.cfg.keyMask
}

// childKey is the table key of one block: the fast scheme with the index's secrets (see
// WithSeed), with the namespace's extra keys (LoRA on every block, the salt on the first
// only) precomputed per namespace. Unseeded, it is Fast64.Block.
func (x *Index) childKey(parent uint64, toks []int32, ri *rootInfo, first bool, mm []mmKey) uint64 {
	var h uint64
	if len(toks) == 16 {
		h = chain(parent, content16((*[16]int32)(toks), &x.sec), &x.sec)
	} else {
		h = hashTokens(parent, toks, &x.sec)
	}
	if ri.hasLo {
		h = mixExtra(h, tagLoRA, ri.lora)
	}
	if len(mm) > 0 {
		h = x.mixMM(h, mm)
	}
	if first && ri.hasSa {
		h = mixExtra(h, tagSalt, ri.salt)
	}
	return h & x.cfg.keyMask
}

// findChild returns the child of parent whose key, tokens and extra keys are these, or 0:
// the hint child if it holds toks (it is the one child the table does not hold: see
// Index.nodes), else whatever the table holds.
func (x *Index) findChild(parent int32, key uint64, toks []int32, mm []mmKey) int32 {
	h := x.nodes[parent].hint
	if h != 0 && len(mm) == 0 && sameTokens(x.blockTokens(h), toks) {
		return h // a text-only child of parent: equal tokens make equal keys
	}
	if kids := x.nodes[parent].children; kids == 0 || (kids == 1 && h != 0) {
		return 0 // no child but the hint
	}
	return x.probeChild(parent, key, toks, mm)
}

// probeChild looks the child of parent whose key, tokens and extra keys are these up in the
// child table, which holds every child but its parent's hint.
func (x *Index) probeChild(parent int32, key uint64, toks []int32, mm []mmKey) int32 {
	t := &x.table
	tag := keyTag(key)
	for i := t.home(tag); ; i = t.step(i) {
		s := t.slots[i]
		if s.n == 0 {
			return 0
		}
		if s.tag != tag {
			continue
		}
		nd := &x.nodes[s.n]
		if nd.key == key && nd.parent == parent && sameTokens(x.blockTokens(s.n), toks) && x.mmEqual(s.n, mm) {
			return s.n
		}
	}
}

// sameTokens compares two blocks of tokens. The tokens are taken two at a time (the
// compiler loads each pair as one 64-bit word) and the differences ORed together, so a
// block of 16 costs 8 word comparisons and one branch, with no call.
func sameTokens(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 16 {
		return same16((*[16]int32)(a), (*[16]int32)(b))
	}
	var d uint64
	for len(a) >= 8 {
		a8, b8 := a[:8:8], b[:8:8]
		// (^ and | share a precedence level in Go: the parentheses matter.)
		d |= (pair(a8[0], a8[1]) ^ pair(b8[0], b8[1])) | (pair(a8[2], a8[3]) ^ pair(b8[2], b8[3])) |
			(pair(a8[4], a8[5]) ^ pair(b8[4], b8[5])) | (pair(a8[6], a8[7]) ^ pair(b8[6], b8[7]))
		a, b = a[8:], b[8:]
	}
	b = b[:len(a)]
	for i := range a {
		d |= uint64(uint32(a[i] ^ b[i]))
	}
	return d == 0
}
