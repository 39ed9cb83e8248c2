package prefix

import (
	"slices"

	"github.com/kvpage/kvpage/blocks"
)

// MissReason says where and why a lookup stopped before the end of the prompt's full
// blocks. It is a value: explaining a lookup allocates nothing and formats nothing.
type MissReason uint8

const (
	// MissNone: the match covers every full block the lookup could take.
	MissNone MissReason = iota
	// MissNeverStored: the next block is not cached and no record says it ever was (or,
	// without WithEvictionHistory, the index keeps no record).
	MissNeverStored
	// MissEvicted: the next block was cached and has been evicted; Explanation.Evicted
	// says by what (policy, window, quota, epoch, reset) and EvictedAt when.
	MissEvicted
	// MissBelowUnit: the prompt agrees with a cached block for fewer tokens than one block
	// (Explanation.SharedTokens of them), or its tail is a partial block that a cached block
	// begins with. The index caches and matches whole blocks only.
	MissBelowUnit
	// MissNamespace: the prompt's first block is cached, but under another namespace (a
	// different LoRA adapter). Namespaces never share blocks.
	MissNamespace
	// MissSalt: the block is cached under the same adapter but another cache salt (or a
	// salt region's public part where the prompt's is private, or the other way round).
	MissSalt
	// MissCapped: the next block is cached, but the lookup left it out so that at least one
	// prompt token is computed (vLLM's len - 1 cap).
	MissCapped
	// MissEAGLE: the last matched block was dropped because EAGLE speculative decoding
	// needs its hidden states recomputed (vLLM drops it the same way).
	MissEAGLE
	// MissGroup: a KV-cache group of a hybrid model had no hit where the others did;
	// Explanation.Group names it. Produced by blocktable/hybrid's Manager.Explain.
	MissGroup
	// MissSparseGap: a group that keeps only some blocks (a sliding window) has a gap where
	// the hit needs one. Produced by blocktable/hybrid's Manager.Explain under sparse
	// retention.
	MissSparseGap
	// MissEpoch: the block is cached under an earlier weight epoch of the namespace
	// (BumpEpoch), which no lookup reaches any more.
	MissEpoch
	// MissNamespaceRequired: the zero Namespace, in an index built WithNamespaceRequired.
	MissNamespaceRequired
	numMissReasons
)

var missNames = [numMissReasons]string{"none", "never-stored", "evicted", "below-unit", "namespace",
	"salt", "capped", "eagle", "group", "sparse-gap", "epoch", "namespace-required"}

// String names the reason ("evicted", "below-unit", ...), for logs and metric labels.
func (r MissReason) String() string {
	if r < numMissReasons {
		return missNames[r]
	}
	return "unknown"
}

// MissReasons lists every reason, in order: for metric label sets and exhaustive tests.
func MissReasons() []MissReason {
	out := make([]MissReason, numMissReasons)
	for i := range out {
		out[i] = MissReason(i)
	}
	return out
}

// EvictCause says what evicted a block.
type EvictCause uint8

const (
	// EvictNone: not evicted.
	EvictNone EvictCause = iota
	// EvictPolicy: the eviction policy chose it (for the pool, or Evict).
	EvictPolicy
	// EvictWindow: it fell out of a sliding window (or was a superseded Mamba state),
	// was released mid-sequence, and was then evicted (blocktable/hybrid).
	EvictWindow
	// EvictQuota: its namespace was over its quota.
	EvictQuota
	// EvictEpoch: its namespace's weight epoch was bumped.
	EvictEpoch
	// EvictReset: Reset dropped it.
	EvictReset
	// EvictDropped: EvictBlocks dropped it, or a block above it (its KV was not valid).
	EvictDropped
	numEvictCauses
)

var causeNames = [numEvictCauses]string{"none", "policy", "window", "quota", "epoch", "reset", "dropped"}

// String names the cause.
func (c EvictCause) String() string {
	if c < numEvictCauses {
		return causeNames[c]
	}
	return "unknown"
}

// LookupOptions are the knobs of a lookup that decide how far a hit may reach.
type LookupOptions struct {
	// LeaveOne caps the hit so that at least one prompt token is left to compute.
	LeaveOne bool
	// EAGLE drops the last matched block, as vLLM does for EAGLE speculative decoding.
	EAGLE bool
}

// Explanation is where and why a lookup stopped. Explain fills it; it is a plain value.
type Explanation struct {
	// Reason is why the match stopped at MatchedBlocks.
	Reason MissReason
	// Evicted is what evicted the next block, when Reason is MissEvicted (or MissEpoch for
	// a block of an earlier epoch that has been evicted since); EvictedAt is when, on the
	// index's logical clock.
	Evicted   EvictCause
	EvictedAt uint64
	// MatchedBlocks is the number of blocks matched (after the cap and the EAGLE drop).
	MatchedBlocks int
	// FullBlocks is the number of full blocks of the prompt, before any cap.
	FullBlocks int
	// SharedTokens is, for MissBelowUnit, how many tokens of the block where the match
	// stopped agree with the cached block tried there.
	SharedTokens int
	// Group is, for MissGroup and MissSparseGap, the KV-cache group that disagreed (and,
	// from a hybrid Manager, the group whose block was evicted, for MissEvicted).
	Group int
}

// Explain is Peek with an explanation: the same blocks and Cursor (counting nothing in
// Stats), and e says where and why the match stopped. It allocates nothing when dst has
// room, and costs what Peek costs plus a constant at the block where the match stopped
// (one hash and a few probes; a miss on the first block also tries every other live
// namespace root).
func (x *Index) Explain(dst []blocks.ID, p *Prompt, o LookupOptions, e *Explanation) ([]blocks.ID, Cursor) {
	base := len(dst)
	dst, c := x.Peek(dst, p, HitLimit(o.LeaveOne))
	*e = Explanation{MatchedBlocks: int(c.blocks), FullBlocks: len(p.Tokens) / x.bs}
	if x.cfg.requireNS && p.Namespace == (Namespace{}) {
		e.Reason = MissNamespaceRequired
		return dst, c
	}
	if o.EAGLE && c.blocks > 0 {
		last := nodeOf(dst[len(dst)-1])
		dst = dst[:len(dst)-1]
		par := x.nodes[last].parent
		c = Cursor{node: par, blocks: c.blocks - 1, gen: x.nodes[par].gen, root: c.root}
		e.MatchedBlocks--
		e.Reason = MissEAGLE
		return dst, c
	}
	x.explainStop(p, o, c, dst[base:], e)
	return dst, c
}

// explainStop fills e.Reason (and its details) for a match that ended at cursor c.
func (x *Index) explainStop(p *Prompt, o LookupOptions, c Cursor, matched []blocks.ID, e *Explanation) {
	bs := x.bs
	m := int(c.blocks)
	limit := len(p.Tokens)
	if o.LeaveOne {
		limit--
	}
	full := max(limit, 0) / bs
	r := x.rootOf(p.Namespace)
	if m == full {
		// Everything the lookup could take matched. What stops it is the cap, or a tail
		// shorter than a block.
		if m < e.FullBlocks && x.cachedNext(r, c, p, m) {
			e.Reason = MissCapped
			return
		}
		// Only the tokens the lookup could take count: with the cap, not the last one.
		if tail := limit - m*bs; tail > 0 && tail < bs && r != 0 {
			if s := x.sharedWithHint(c.node, p.Tokens[m*bs:limit]); s > 0 {
				e.Reason, e.SharedTokens = MissBelowUnit, s
			}
		}
		return
	}
	toks := p.Tokens[m*bs : (m+1)*bs]
	mmLo := 0
	var mm []mmKey
	if len(p.MM) > 0 {
		mm = x.blockMM(p, m, &mmLo)
	}
	if cause, at := x.ctl.ghost.find(x.nextEventKey(r, c, p.Namespace, toks, m == 0, mm)); cause != EvictNone {
		e.Reason, e.Evicted, e.EvictedAt = MissEvicted, cause, at
		if cause == EvictEpoch {
			e.Reason = MissEpoch // cached under an earlier weight epoch, evicted since
		}
		return
	}
	if reason, cause, at := x.explainEpoch(p, m); reason != MissNone {
		e.Reason, e.Evicted, e.EvictedAt = reason, cause, at
		return
	}
	if m == 0 {
		if reason := x.elsewhere(r, p.Namespace, toks, mm); reason != MissNone {
			e.Reason = reason
			return
		}
	}
	if len(mm) > 0 && r != 0 && x.saltVariant(c.node, toks, r, m == 0, mm) {
		e.Reason = MissSalt
		return
	}
	if r != 0 {
		if s := x.sharedWithHint(c.node, toks); s > 0 {
			e.Reason, e.SharedTokens = MissBelowUnit, s
			return
		}
	}
	e.Reason = MissNeverStored
}

// nextKey is the chained key the block after cursor c would have in namespace ns, whether
// or not the namespace has a root now (keys depend on content, not on slots).
func (x *Index) nextKey(r int32, c Cursor, ns Namespace, toks []int32, first bool, mm []mmKey) uint64 {
	if r != 0 {
		parent := x.nodes[r].key
		if c.blocks > 0 {
			parent = x.nodes[c.node].key
		}
		return x.childKey(parent, toks, x.root(r), first, mm)
	}
	ri := x.ctl.rootInfoFor(ns)
	return x.childKey(fastRoot&x.cfg.keyMask, toks, &ri, first, mm)
}

// nextEventKey is eventKey of the block after cursor c, computed from the prompt: the
// configured hasher's hash of it, chained to its parent's event hash.
func (x *Index) nextEventKey(r int32, c Cursor, ns Namespace, toks []int32, first bool, mm []mmKey) uint64 {
	if !x.ctl.ghost.on() {
		return 0
	}
	var parent []byte
	if r != 0 && c.blocks > 0 && x.isBlock(c.node) {
		parent = x.appendHash(x.hashBuf[:0], c.node)
	} else {
		parent = append(x.hashBuf[:0], x.rootHash...)
	}
	e := x.extraOf(ns, first, mm)
	hs := len(parent)
	buf := slices.Grow(parent, x.hashSize)[:hs+x.hashSize]
	x.hasher.Block(buf[hs:], buf[:hs], toks, e)
	x.hashBuf = buf[:0]
	return leading64(buf[hs:])
}

// cachedNext reports whether block m of p (the first one a cap left out) is cached as the
// child of cursor c.
func (x *Index) cachedNext(r int32, c Cursor, p *Prompt, m int) bool {
	if r == 0 || (m+1)*x.bs > len(p.Tokens) {
		return false
	}
	toks := p.Tokens[m*x.bs : (m+1)*x.bs]
	mmLo := 0
	var mm []mmKey
	if len(p.MM) > 0 {
		mm = x.blockMM(p, m, &mmLo)
	}
	at := c.node
	if c.blocks == 0 {
		at = r
	}
	return x.findChild(at, x.nextKey(r, c, p.Namespace, toks, m == 0, mm), toks, mm) != 0
}

// sharedWithHint returns how many leading tokens of toks agree with node n's hint child.
func (x *Index) sharedWithHint(n int32, toks []int32) int {
	if n <= 0 || int(n) >= len(x.nodes) {
		return 0
	}
	h := x.nodes[n].hint
	if h == 0 {
		return 0
	}
	have := x.blockTokens(h)
	s := 0
	for s < len(toks) && s < len(have) && have[s] == toks[s] {
		s++
	}
	if s == len(have) {
		return 0 // the whole block agrees: not a sub-block miss
	}
	return s
}

// elsewhere looks for the prompt's first block under every other live namespace root and
// says whether it is cached under another salt (same adapter) or another namespace.
func (x *Index) elsewhere(own int32, ns Namespace, toks []int32, mm []mmKey) MissReason {
	found := MissNone
	for i := range x.rootInfo {
		r := int32(x.nb + 1 + i)
		if r == own || x.nodes[r].flags&flagRoot == 0 || x.nodes[r].children == 0 {
			continue
		}
		ri := &x.rootInfo[i]
		k := x.childKey(x.nodes[r].key, toks, ri, true, mm)
		if x.findChild(r, k, toks, mm) == 0 {
			continue
		}
		if ri.ns.LoRA == ns.LoRA {
			return MissSalt
		}
		found = MissNamespace
	}
	return found
}

// saltVariant reports whether block toks, which carries extra keys mm, is cached after
// cursor node n without them: the same tokens stored by a prompt whose salt region (or
// multimodal input) differs here.
func (x *Index) saltVariant(n int32, toks []int32, r int32, first bool, mm []mmKey) bool {
	at := n
	if !x.isBlock(n) {
		at = r
	}
	for i := range mm {
		if isSaltKey(mm[i].id) {
			k := x.childKey(x.nodes[at].key, toks, x.root(r), first, nil)
			return x.findChild(at, k, toks, nil) != 0
		}
	}
	return false
}
