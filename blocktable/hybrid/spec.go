package hybrid

import "fmt"

// Spec is one KV-cache group's kind of layer: how many tokens a block holds, how many
// bytes a block takes, which tokens the group no longer needs as a sequence advances, and
// how it finds a prefix-cache hit. Specs are comparable values: groups with equal specs
// are looked up together, as vLLM does (a block is a hit only if every one of them has it).
// Register adds a kind of one's own.
type Spec interface {
	// Kind names the spec ("full_attention", "sliding_window", ...).
	Kind() string
	// BlockSize is the tokens per block of the group.
	BlockSize() int
	// PageBytes is the bytes one block of the group takes over all its layers.
	PageBytes() int64
	// Skipped returns how many leading tokens the group no longer needs once computed
	// tokens have been computed; the blocks wholly inside them are released to the null
	// block before the sequence allocates more (0 for full attention).
	Skipped(computed int) int
	// Cacheable reports whether the group's full blocks enter the prefix index.
	Cacheable() bool
	// Downward reports whether a hit of n blocks implies every shorter hit (full
	// attention): the coordinator looks such groups up first and only once.
	Downward() bool
	// Hit returns the length, in the group's blocks, of the longest hit of at most
	// maxBlocks blocks, a multiple of align blocks, that the group can serve given which
	// of its blocks are cached. The blocks the sequence then takes are those from
	// Skipped(n*BlockSize())/BlockSize() to n; earlier ones are the null block. eagle
	// drops the last matched block (EAGLE/MTP needs its hidden states recomputed).
	Hit(c Cached, maxBlocks, align int, eagle bool) int
}

// Cached says whether block i (in the group's blocks) of the prompt being matched is
// cached for the group.
type Cached interface {
	Cached(i int) bool
}

// FullAttention is full (causal) attention, MLA included: every token is needed until the
// sequence ends, and a hit is the longest cached prefix.
type FullAttention struct {
	Block int   // tokens per block
	Bytes int64 // bytes per block over the group's layers
	MLA   bool  // multi-head latent attention (DeepSeek): same caching, its own page size
}

// Kind implements Spec.
func (s FullAttention) Kind() string {
	if s.MLA {
		return KindMLA
	}
	return KindFullAttention
}

// BlockSize implements Spec.
func (s FullAttention) BlockSize() int { return s.Block }

// PageBytes implements Spec.
func (s FullAttention) PageBytes() int64 { return s.Bytes }

// Skipped implements Spec: full attention needs every token.
func (FullAttention) Skipped(int) int { return 0 }

// Cacheable implements Spec.
func (FullAttention) Cacheable() bool { return true }

// Downward implements Spec.
func (FullAttention) Downward() bool { return true }

// Hit implements Spec: the cached prefix, less one block for EAGLE, cut to the alignment.
func (FullAttention) Hit(c Cached, maxBlocks, align int, eagle bool) int {
	n := 0
	for n < maxBlocks && c.Cached(n) {
		n++
	}
	if eagle && n > 0 {
		n--
	}
	return n - n%align
}

// SlidingWindow is sliding-window attention over the last Window tokens (the token being
// computed included): earlier blocks are released as the sequence advances, and a hit of n
// blocks needs only the ceil((Window-1)/Block) blocks before its end cached.
type SlidingWindow struct {
	Block  int
	Window int
	Bytes  int64
}

// Kind implements Spec.
func (SlidingWindow) Kind() string { return KindSlidingWindow }

// BlockSize implements Spec.
func (s SlidingWindow) BlockSize() int { return s.Block }

// PageBytes implements Spec.
func (s SlidingWindow) PageBytes() int64 { return s.Bytes }

// Skipped implements Spec: the tokens before the window of the next token.
func (s SlidingWindow) Skipped(computed int) int { return max(0, computed-s.Window+1) }

// Cacheable implements Spec.
func (SlidingWindow) Cacheable() bool { return true }

// Downward implements Spec.
func (SlidingWindow) Downward() bool { return false }

// Hit implements Spec, as vLLM's SlidingWindowManager: scan from the right for a run of
// the blocks the window needs (one more for EAGLE, which then drops it), the run's end
// aligned; a shorter run that starts at block 0 is a hit too.
func (s SlidingWindow) Hit(c Cached, maxBlocks, align int, eagle bool) int {
	need := (s.Window - 1 + s.Block - 1) / s.Block
	if eagle {
		need++
	}
	n, run := -1, 0
	for i := maxBlocks - 1; i >= 0; i-- {
		if !c.Cached(i) {
			run = 0
			continue
		}
		if run == 0 && align != 1 && (i+1)%align != 0 {
			continue
		}
		if run++; run >= need {
			n = i + run
			break
		}
	}
	if n < 0 {
		n = run - run%align
	}
	if eagle && n > 0 {
		n--
	}
	return n
}

// ChunkedLocal is chunked local attention (Llama 4): a token attends to the tokens of its
// own chunk of Chunk tokens, so earlier chunks are released, and a hit needs only the
// blocks of the chunk it ends in.
type ChunkedLocal struct {
	Block int
	Chunk int
	Bytes int64
}

// Kind implements Spec.
func (ChunkedLocal) Kind() string { return KindChunkedLocal }

// BlockSize implements Spec.
func (s ChunkedLocal) BlockSize() int { return s.Block }

// PageBytes implements Spec.
func (s ChunkedLocal) PageBytes() int64 { return s.Bytes }

// Skipped implements Spec: the chunks before the current one.
func (s ChunkedLocal) Skipped(computed int) int { return computed / s.Chunk * s.Chunk }

// Cacheable implements Spec.
func (ChunkedLocal) Cacheable() bool { return true }

// Downward implements Spec.
func (ChunkedLocal) Downward() bool { return false }

// Hit implements Spec, as vLLM's ChunkedLocalAttentionManager: the blocks before the chunk
// that the longest allowed hit ends in count as computed; from there the cached prefix.
// (vLLM supports neither EAGLE nor mixed block sizes with it; neither does this.)
func (s ChunkedLocal) Hit(c Cached, maxBlocks, _ int, _ bool) int {
	n := maxBlocks * s.Block / s.Chunk * s.Chunk / s.Block
	for n < maxBlocks && c.Cached(n) {
		n++
	}
	return n
}

// Mamba cache modes, as vLLM's mamba_cache_mode.
const (
	// MambaNone and MambaAll allocate and cache the state of every block, and keep only
	// the latest one (vLLM's default path). vLLM serves "none" with a block as long as the
	// model's context, so that in practice a sequence has one state block and no hits.
	MambaNone = "none"
	MambaAll  = "all"
	// MambaAlign is vLLM's align mode: a sequence holds one running state block (the
	// null block pads its table before it) and, for one step, the state block before it;
	// running blocks that fill are cached, so prefills split on block boundaries
	// (AlignedChunk) leave the states at those boundaries for later hits.
	MambaAlign = "align"
)

// Mamba is a Mamba or linear-attention state (Jamba, Qwen3-Next): only the state after
// the last computed token is needed, and a hit is the latest cached state.
type Mamba struct {
	Block int
	Bytes int64
	Mode  string // MambaNone, MambaAll or MambaAlign
}

// Kind implements Spec.
func (Mamba) Kind() string { return KindMamba }

// BlockSize implements Spec.
func (s Mamba) BlockSize() int { return s.Block }

// PageBytes implements Spec.
func (s Mamba) PageBytes() int64 { return s.Bytes }

// Skipped implements Spec: every token but the last computed one.
func (Mamba) Skipped(computed int) int { return max(0, computed-1) }

// Cacheable implements Spec: vLLM's MambaManager caches full blocks in every mode.
func (Mamba) Cacheable() bool { return true }

// Downward implements Spec.
func (Mamba) Downward() bool { return false }

// Hit implements Spec, as vLLM's MambaManager: the rightmost cached aligned block.
func (Mamba) Hit(c Cached, maxBlocks, align int, _ bool) int {
	for i := maxBlocks - 1; i >= 0; i-- {
		if c.Cached(i) && (i+1)%align == 0 {
			return i + 1
		}
	}
	return 0
}

// NonCacheable is a group whose blocks are never shared: cross-attention over encoder
// states, scratch buffers. It allocates like full attention and never hits.
type NonCacheable struct {
	Block int
	Bytes int64
	Name  string // Kind; "" means KindNonCacheable
}

// Kind implements Spec.
func (s NonCacheable) Kind() string {
	if s.Name == "" {
		return KindNonCacheable
	}
	return s.Name
}

// BlockSize implements Spec.
func (s NonCacheable) BlockSize() int { return s.Block }

// PageBytes implements Spec.
func (s NonCacheable) PageBytes() int64 { return s.Bytes }

// Skipped implements Spec.
func (NonCacheable) Skipped(int) int { return 0 }

// Cacheable implements Spec.
func (NonCacheable) Cacheable() bool { return false }

// Downward implements Spec.
func (NonCacheable) Downward() bool { return false }

// Hit implements Spec: never.
func (NonCacheable) Hit(Cached, int, int, bool) int { return 0 }

// validate checks the sizes every spec must have.
func validate(s Spec) error {
	if s == nil {
		return fmt.Errorf("%w: nil spec", errInvalid)
	}
	if s.BlockSize() <= 0 || s.BlockSize() > 1<<20 {
		return fmt.Errorf("%w: %s block size %d", errInvalid, s.Kind(), s.BlockSize())
	}
	if s.PageBytes() < 0 {
		return fmt.Errorf("%w: %s page bytes %d", errInvalid, s.Kind(), s.PageBytes())
	}
	switch v := s.(type) {
	case SlidingWindow:
		if v.Window <= 0 {
			return fmt.Errorf("%w: sliding window %d", errInvalid, v.Window)
		}
	case ChunkedLocal:
		if v.Chunk <= 0 || v.Chunk%v.Block != 0 {
			return fmt.Errorf("%w: chunk %d with block %d", errInvalid, v.Chunk, v.Block)
		}
	case Mamba:
		if v.Mode != MambaNone && v.Mode != MambaAll && v.Mode != MambaAlign {
			return fmt.Errorf("%w: mamba cache mode %q", errInvalid, v.Mode)
		}
	}
	return nil
}
