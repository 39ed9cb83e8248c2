package hybrid

import (
	"fmt"
	"math"
	"slices"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
)

// Config configures a Manager.
type Config struct {
	// Groups are the model's KV-cache groups, in vLLM's group order (which is the order
	// of allocation and of release). At least one.
	Groups []Spec
	// NumBlocks is the pool's size; block 0 is the null block, so NumBlocks-1 are usable.
	NumBlocks int
	// MatchUnit is the tokens per unit of prefix matching (vLLM's hash_block_size); it
	// must divide every group's block size. 0 means their greatest common divisor.
	MatchUnit int
	// Eagle drops the last matched block of every group (EAGLE / MTP drafting needs the
	// hidden states of the last block recomputed), as vLLM's use_eagle.
	Eagle bool
	// FreeUncachedFirst puts a released block that is not cached at the front of the free
	// queue, so it is reused before any cached block is evicted (vLLM's newer order). The
	// default appends every released block, as vLLM at ff1b90a2 does.
	FreeUncachedFirst bool
	// Observer receives the prefix index's events, each naming its KV-cache group
	// (prefix.GroupTree.SetObserver: BlockStored when a prefix gains a group's block,
	// BlockRemoved when it loses it, AllBlocksCleared on ResetPrefixCache); a
	// kvevents.Recorder publishes them with vLLM's group_idx. nil: no events, no cost.
	Observer prefix.Observer
	// Hasher hashes the blocks for events (nil: prefix.Fast64).
	Hasher prefix.Hasher
	// SparseRetention turns on vLLM's prefix_cache_retention_interval, with
	// RetentionInterval its value: sliding-window and Mamba groups cache only the blocks a
	// hit can use at the retained boundaries, and the rest of their full blocks are never
	// cached (retention.go). Off, every full block is cached (vLLM's None, and its
	// behaviour at ff1b90a2 that W4 reproduces).
	SparseRetention bool
	// RetentionInterval, with SparseRetention, is the tokens between retained boundaries:
	// 0 keeps only the prompt's replay boundary (vLLM's default since PR #52216), a
	// positive multiple of the LCM of the groups' block sizes keeps one boundary every
	// that many tokens as well. Without SparseRetention it must be 0: New refuses any
	// other value with ErrRetentionWithoutSparse, since dense retention caches every
	// block and an interval there would mean nothing.
	RetentionInterval int
	// Preemption orders victims for Preempt (a policy of package evict: fcfs, priority,
	// progress, cost, or one's own). Nil means newest first (vLLM's FCFS default).
	Preemption evict.Preemption
	// Tiers, when set, gives the prefix index lower tiers (host, disk, a user's own), as
	// prefix.WithTiers gives an Index: blocks the device evicts stay findable there by
	// tier 1's write policy, admission loads what they hold (AdmitTiered), TakePlans and
	// CompleteTransfer drive the copies, and Swap preemption demotes into them (tiers.go).
	// Nil: no lower tiers, and none of this costs anything.
	Tiers *prefix.TierConfig
}

// Request is what Admit needs of a new sequence.
type Request struct {
	// Prompt is the sequence's tokens so far; all of them get slots.
	Prompt []int32
	// MaxTokens bounds the sequence's length (prompt plus generated tokens), at most
	// math.MaxInt32 (Admit refuses more with a blocktable.SizeError). Admit sizes the
	// sequence's tables for it, but for no more tokens than the pool's blocks cover, so a
	// huge bound costs no memory up front.
	MaxTokens int
	// SkipCacheRead admits without looking the prompt up (vLLM's
	// skip_reading_prefix_cache, for prompt logprobs); its blocks are still cached.
	SkipCacheRead bool
	// Namespace keeps sequences of different LoRA adapters or cache salts from sharing
	// blocks: each namespace has its own prefix tree. The zero value is the default.
	Namespace prefix.Namespace
	// HitLimit, when positive, caps the hit at that many tokens (the fixed point is found
	// under the cap, so the capped hit is valid for every group): a scheduler that must
	// recompute part of the prompt fixes the shorter hit here.
	HitLimit int
	// Prefill, when positive, gives slots to only the hit plus this many prompt tokens
	// (a chunked prefill's first chunk); Extend schedules the rest. 0 means the whole
	// prompt.
	Prefill int
	// Priority is the scheduling priority the preemption policy sees; as in vLLM, a
	// larger value is less important.
	Priority int
	// Resumed marks a request preempted (recompute mode) and admitted again: its hit,
	// mostly its own blocks from before, is counted in Stats.Resumed* instead, so that
	// re-hits do not flatter the hit rate.
	Resumed bool
}

// Stats are the Manager's counters.
type Stats struct {
	Capacity     int    // usable blocks (the null block excluded)
	Free         int    // blocks in the free queue: never used, released, or cached and unreferenced
	Running      int    // admitted sequences
	Cached       []int  // cached blocks per group
	Nodes        int    // logical prefix nodes (tombstones included)
	Evictions    uint64 // cached blocks evicted to satisfy allocations
	Duplicates   uint64 // blocks cached under a prefix that already had a block of the group
	Dropped      uint64 // cached blocks dropped by EvictBlocks
	HitTokens    uint64 // prompt tokens served from the cache at admission
	PromptTokens uint64 // prompt tokens admitted
	// ResumedHitTokens and ResumedPromptTokens are the same for Request.Resumed
	// admissions, which HitTokens and PromptTokens leave out.
	ResumedHitTokens, ResumedPromptTokens uint64
	Forks                                 uint64 // successful Fork calls
	CopyOnWrites                          uint64 // blocks copied on a first write into a block shared by a fork
	Preemptions                           uint64 // sequences preempted
	// CachedPrefixes counts, per group, the prefixes with a cached block (Cached less the
	// duplicates): what the index's events say is held.
	CachedPrefixes []int
	// The lower tiers' counters (Config.Tiers; TierCounts has the same), as
	// blocktable.Stats has them: Swapped is the sequences Swap preemption holds in the
	// tiers now; SwapOuts and SwapIns count those it put there and Resume brought back;
	// LoadedTokens and LoadFailedTokens the tokens of loads from lower tiers that
	// completed ok (for admissions that are not Resumed) and that failed.
	Swapped                        int
	SwapOuts, SwapIns              uint64
	LoadedTokens, LoadFailedTokens uint64
}

// Manager keeps the block tables of sequences of a hybrid model: one table per KV-cache
// group, all drawn from one pool with one free queue, and one prefix index keyed by
// (prefix, group). See the package documentation.
type Manager struct {
	specs []Spec
	ng    int
	bs    []int // tokens per block, per group
	shift []int // log2 of bs when it is a power of two, else -1
	k     []int // match units per block, per group
	unit  int
	lcm   int     // tokens: hits are multiples of it
	kinds [][]int // groups that take part in hits, equal specs together, downward first
	// sparse and interval are Config.SparseRetention and RetentionInterval.
	sparse   bool
	interval int
	kdone    []bool
	eagle    bool
	st       *store
	// cacheable: some group caches its blocks; caches and skips per group (whether the
	// group ever caches, ever releases early), so the decode path makes no interface call
	// for groups that do neither.
	cacheable bool
	caches    []bool
	skips     []bool
	// align marks Mamba groups in align mode (align.go): one running state block per
	// step, the state of the step before released once it is copied on.
	align    []bool
	anyAlign bool

	seqs map[blocktable.SeqID]*seq
	// spare keeps records no sequence uses, each with its token, path and table buffers,
	// for the next admission or the next query's scratch (Match, Explain, AdmitCost), so
	// that steady state allocates nothing. It keeps at most one record more than the
	// Manager has sequences, running and swapped out (drop trims it to maxSpare), where it
	// used to keep one for the most sequences ever alive, for as long as the Manager
	// lived. A call that takes a record and gives it back (a query, a refused admission)
	// leaves it as long as it was, or at one record when it was empty.
	spare []*seq
	// The sequence looked up last: a decode loop appends to one sequence many times.
	lastID  blocktable.SeqID
	lastSeq *seq
	view    cachedView

	// copies are the copy-on-write operations since the last TakeCopies (fork.go).
	copies []CopyOp

	preempt    evict.Preemption
	clock      uint64 // logical arrival clock: one tick per Admit and Fork
	pre        preemptScratch
	counters   Stats       // the counters Stats reports beside the pool's
	tierCounts TierCounts  // the lower tiers' counters (tiers.go)
	admitted   AdmitResult // what the last admission took from each tier (AdmitTiered)

	// ordered is preempt when it is an evict.OrderedPreemption: order then keeps the
	// running sequences in its order (order.go), re-placed as they grow when
	// progressOrder; frontier and walked are Preempt's scratch for the walk; fullWalk
	// (tests) makes Preempt take the full walk over every candidate anyway.
	ordered       evict.OrderedPreemption
	progressOrder bool
	order         []*seq
	frontier      []int32
	walked        []*seq
	fullWalk      bool
	// fa keeps every sequence's Freeable for the policies that read it (freeable.go);
	// planFreeable (tests) makes Preempt and Freeable plan it anyway.
	fa           freeAcct
	planFreeable bool

	// preTokens bounds the tokens a new sequence's slices are sized for: what the pool's
	// blocks cover at the largest block size, the longest sequence a model with a
	// full-attention group can reach. Past it (only a model whose every group releases
	// early gets there) the slices grow as the sequence does.
	preTokens int

	// lowGroup is the group that last lowered the fixed point in hit (-1: none), and
	// lowFrom the length it was given: what Explain reports.
	lowGroup, lowFrom int
	// explainLower: Explain explains a pure lower-tier continuation (cachedFor).
	explainLower bool

	// loads files the sequences whose load is in flight, swapped the sequences Swap
	// preemption put into the lower tiers (tiers.go, swap.go).
	loads   map[prefix.TransferID]blocktable.SeqID
	swapped map[blocktable.SeqID]*swapRec
	swap    swapScratch
}

type seq struct {
	root      prefix.Node // the namespace's root node (0: the default namespace)
	ns        prefix.Namespace
	tokens    []int32
	path      []prefix.Node // node per match unit, as far as it is known to be live
	pinned    prefix.Node
	tables    [][]blocks.ID
	numCached []int // per group: blocks already cached (or skipped)
	computed  int
	// quiet is the largest token count the sequence reaches with no group allocating or
	// caching a block: a decode step below it only has to check the windows.
	quiet     int
	maxTokens int
	// lastState is, per Mamba align group, the table entry of the state block the
	// previous allocation left behind (-1: none); released once the sequence has moved
	// past it (align.go).
	lastState []int
	// The tables cover max(extent, computed) tokens: extent is where the last allocation
	// reached, reserved lookahead slots included (the decode path does not update it).
	extent int
	// resEnd ends the slots Reserve made private to the sequence, which FillSlots may
	// hand out past computed (0 after a Fork shares the block they start in). An absolute
	// position, so that the decode path need not count it down.
	resEnd int
	// forked is set on both sides of a Fork: only then can the block the next write lands
	// in be shared (a hit shares full blocks only), so sharedWrite asks nothing otherwise.
	forked    bool
	priority  int
	arrival   uint64
	hit       int
	promptLen int
	// id, pos (the place in Manager.order, -1 when not in it) and info (key's scratch)
	// serve the preemption order (order.go).
	id   blocktable.SeqID
	pos  int32
	info evict.Candidate
	// loading is the load in flight into the sequence's blocks from loadFrom to loadTo
	// tokens (0: none); until it completes nothing past loadFrom is cached.
	loading          prefix.TransferID
	loadFrom, loadTo int
	loadResumed      bool // the load is a Resumed admission's: not counted in LoadedTokens
	// slot numbers the record for the Freeable accounting (freeable.go).
	slot uint32
}

// New builds a Manager.
func New(cfg Config) (*Manager, error) {
	if len(cfg.Groups) == 0 || len(cfg.Groups) > 255 {
		return nil, fmt.Errorf("%w: %d KV-cache groups", errInvalid, len(cfg.Groups))
	}
	if cfg.NumBlocks < 2 || cfg.NumBlocks > 1<<30 {
		return nil, fmt.Errorf("%w: %d blocks", errInvalid, cfg.NumBlocks)
	}
	m := &Manager{specs: append([]Spec(nil), cfg.Groups...), ng: len(cfg.Groups), eagle: cfg.Eagle,
		seqs: map[blocktable.SeqID]*seq{}, preempt: cfg.Preemption}
	if m.preempt == nil {
		m.preempt = evict.NewFCFSPreemption()
	}
	if o, ok := m.preempt.(evict.OrderedPreemption); ok {
		m.ordered, m.progressOrder = o, o.ReadsProgress()
	}
	g0 := 0
	for _, s := range m.specs {
		if err := validate(s); err != nil {
			return nil, err
		}
		g0 = gcd(g0, s.BlockSize())
	}
	m.unit = cfg.MatchUnit
	if m.unit == 0 {
		m.unit = g0
	}
	if m.unit <= 0 || g0%m.unit != 0 {
		return nil, fmt.Errorf("%w: match unit %d does not divide the block sizes", errInvalid, m.unit)
	}
	m.lcm = 1
	for g, s := range m.specs {
		m.bs = append(m.bs, s.BlockSize())
		sh := -1
		if b := s.BlockSize(); b&(b-1) == 0 {
			sh = 0
			for 1<<sh < b {
				sh++
			}
		}
		m.shift = append(m.shift, sh)
		m.k = append(m.k, s.BlockSize()/m.unit)
		m.cacheable = m.cacheable || s.Cacheable()
		m.caches = append(m.caches, s.Cacheable())
		m.skips = append(m.skips, s.Skipped(1<<40) > 0)
		ma, isMamba := s.(Mamba)
		m.align = append(m.align, isMamba && ma.Mode == MambaAlign)
		m.anyAlign = m.anyAlign || m.align[g]
		if _, ignore := s.(NonCacheable); ignore {
			continue
		}
		m.lcm = m.lcm / gcd(m.lcm, s.BlockSize()) * s.BlockSize()
		placed := false
		for i, kind := range m.kinds {
			if m.specs[kind[0]] == s {
				m.kinds[i] = append(m.kinds[i], g)
				placed = true
				break
			}
		}
		if !placed {
			m.kinds = append(m.kinds, []int{g})
		}
	}
	// Downward (full attention) kinds first, keeping their order otherwise.
	var sorted [][]int
	for _, down := range []bool{true, false} {
		for _, kind := range m.kinds {
			if m.specs[kind[0]].Downward() == down {
				sorted = append(sorted, kind)
			}
		}
	}
	m.kinds = sorted
	m.kdone = make([]bool, len(m.kinds))
	if err := m.setRetention(&cfg); err != nil {
		return nil, err
	}
	m.st = newStore(cfg.NumBlocks, m.unit, m.ng, cfg.FreeUncachedFirst)
	m.preTokens = (cfg.NumBlocks - 1) * slices.Max(m.bs)
	m.initFreeable(cfg.NumBlocks)
	m.view.st = m.st
	if cfg.Observer != nil {
		if err := m.st.t.SetObserver(cfg.Observer, cfg.Hasher, m.k); err != nil {
			return nil, err
		}
	}
	if cfg.Tiers != nil {
		if err := m.st.t.SetTiers(*cfg.Tiers); err != nil {
			return nil, err
		}
		m.st.tiers = newTierState(cfg.Tiers, cfg.NumBlocks)
	}
	return m, nil
}

// div is tokens / block size of group g: a shift for the usual power-of-two sizes, since
// the decode path divides several times a step and a 64-bit division costs tens of cycles.
func (m *Manager) div(g, tokens int) int {
	if sh := m.shift[g]; sh >= 0 {
		return tokens >> sh
	}
	return tokens / m.bs[g]
}

// ceil is tokens / block size of group g, rounded up: the blocks tokens need.
func (m *Manager) ceil(g, tokens int) int { return m.div(g, tokens+m.bs[g]-1) }

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Groups returns the group specs, in group order: the Manager's own slice (New copied
// Config.Groups), which never changes, to read, not to write to, as Tokens' slice. It is
// clipped to its length, so that an append to it copies.
func (m *Manager) Groups() []Spec { return m.specs[:len(m.specs):len(m.specs)] }

// cachedView answers Spec.Hit's questions for one kind over the path being matched.
type cachedView struct {
	st   *store
	path []prefix.Node
	kind []int
	k    int
	// devUnits is where the device's lists end and the lower tiers' begin, in match
	// units, for lowerView.
	devUnits int
}

// Cached implements Cached: block i of the kind's groups is cached in every one of them.
func (v *cachedView) Cached(i int) bool {
	u := (i+1)*v.k - 1
	if u >= len(v.path) {
		return false
	}
	n := v.path[u]
	for _, g := range v.kind {
		if v.st.first(n, g) == blocks.NullID {
			return false
		}
	}
	return true
}

// hit is vLLM's fixed point over the kinds: full attention first and once, every other
// kind accepting or lowering the length until it is stable (one round for one full kind
// and one other, as vLLM's simple hybrid), every length a multiple of the LCM of the
// block sizes. maxLen is in tokens; so is the result. s.path holds the matched nodes.
func (m *Manager) hit(s *seq, maxLen int) int { return m.hitIn(s, maxLen, &m.view) }

// hitIn is hit with c answering which blocks are cached: m.view (the device) or its
// lowerView (the device, then the lower tiers).
func (m *Manager) hitIn(s *seq, maxLen int, c Cached) int {
	if len(m.kinds) == 0 {
		return 0
	}
	m.view.path = s.path
	if len(m.kinds) == 1 {
		g := m.kinds[0][0]
		m.view.kind, m.view.k = m.kinds[0], m.k[g]
		return m.specs[g].Hit(c, maxLen/m.bs[g], m.lcm/m.bs[g], m.eagle) * m.bs[g]
	}
	simple := len(m.kinds) == 2 && m.specs[m.kinds[0][0]].Downward()
	clear(m.kdone)
	m.lowGroup = -1
	hit := maxLen
	for {
		cur := hit
		for i, kind := range m.kinds {
			g := kind[0]
			bs := m.bs[g]
			if m.kdone[i] && m.specs[g].Downward() {
				cur = cur / bs * bs
				continue
			}
			m.view.kind, m.view.k = kind, m.k[g]
			next := m.specs[g].Hit(c, cur/bs, m.lcm/bs, m.eagle) * bs
			if i > 0 && next < cur {
				m.lowGroup, m.lowFrom = g, cur // for Explain: who lowered it, from where
			}
			cur = next
			m.kdone[i] = true
		}
		if cur >= hit {
			break
		}
		hit = cur
		if simple {
			break
		}
	}
	return hit
}

// blockAt is the first block cached for group g at its block i along s.path.
func (m *Manager) blockAt(s *seq, g, i int) blocks.ID {
	return blocks.ID(m.st.first(s.path[(i+1)*m.k[g]-1], g))
}

func (m *Manager) newSeq(req *Request) *seq {
	var s *seq
	if n := len(m.spare); n > 0 {
		s = m.spare[n-1]
		m.spare[n-1] = nil // the list's array keeps no record it no longer owns
		m.spare = m.spare[:n-1]
	} else {
		s = &seq{tables: make([][]blocks.ID, m.ng), numCached: make([]int, m.ng), lastState: make([]int, m.ng), slot: m.newSlot()}
	}
	for g := range s.lastState {
		s.lastState[g] = -1
	}
	s.tokens = append(s.tokens[:0], req.Prompt...)
	s.path, s.pinned, s.computed, s.maxTokens = s.path[:0], 0, 0, req.MaxTokens
	s.extent, s.resEnd, s.priority, s.hit, s.promptLen = 0, 0, req.Priority, 0, len(req.Prompt)
	s.forked, s.loading = false, 0
	s.ns, s.root = req.Namespace, m.st.root(req.Namespace, false)
	// Sized for the whole sequence, so that its decode steps allocate nothing, but no
	// further than the pool could hold at once: a legal but huge MaxTokens must not
	// allocate its tokens up front (see preTokens).
	pre := min(req.MaxTokens, max(len(req.Prompt), m.preTokens))
	for g := range s.tables {
		if c := (pre + m.bs[g] - 1) / m.bs[g]; cap(s.tables[g]) < c {
			s.tables[g] = make([]blocks.ID, 0, c)
		}
		s.tables[g], s.numCached[g] = s.tables[g][:0], 0
	}
	if c := pre / m.unit; cap(s.path) < c {
		s.path = make([]prefix.Node, 0, c)
	}
	if cap(s.tokens) < pre {
		s.tokens = append(make([]int32, 0, pre), req.Prompt...)
	}
	return s
}

// walk sets s.path to the nodes of s's first units that the trie has, up to maxUnits.
func (m *Manager) walk(s *seq, maxUnits int) {
	s.path = s.path[:0]
	if s.root < 0 {
		return // a namespace with nothing cached
	}
	parent := s.root
	for u := 0; u < maxUnits && (u+1)*m.unit <= len(s.tokens); u++ {
		n := m.st.next(parent, s.tokens[u*m.unit:(u+1)*m.unit])
		if n == 0 {
			return
		}
		s.path = append(s.path, n)
		parent = n
	}
}

func (m *Manager) lookup(id blocktable.SeqID) (*seq, bool) {
	if m.lastSeq != nil && m.lastID == id {
		return m.lastSeq, true
	}
	s, ok := m.seqs[id]
	if ok {
		m.lastID, m.lastSeq = id, s
	}
	return s, ok
}

// Match returns the hit Admit would take for prompt in the default namespace, in tokens,
// touching nothing.
func (m *Manager) Match(prompt []int32) int {
	hit, _ := m.MatchRequest(&Request{Prompt: prompt, MaxTokens: len(prompt)})
	return hit
}

// MatchRequest returns the hit Admit would take for req (its namespace, HitLimit and
// SkipCacheRead included), in tokens, touching nothing. A nil req is refused with
// blocktable.ErrInvalidArgument, as Admit refuses it. With lower tiers it is MatchTiers'
// hit: a lower-tier hit that needs nothing loaded is part of the hit Admit takes.
func (m *Manager) MatchRequest(req *Request) (int, error) {
	hit, _, err := m.MatchTiers(req)
	return hit, err
}

// HitBlocks returns, for each group, the device blocks a hit of hitTokens on prompt takes
// (the null block where the group no longer needs the tokens): vLLM's computed blocks.
// It reads the device only: a block only a lower tier holds (Config.Tiers; past the
// device hit, up to MatchTiers' hit + load) is the null block too, as one the group no
// longer needs, so pass it the device's own hit, not one that includes a load.
func (m *Manager) HitBlocks(prompt []int32, hitTokens int) [][]blocks.ID {
	s := m.newSeq(&Request{Prompt: prompt, MaxTokens: len(prompt)})
	m.walk(s, hitTokens/m.unit)
	out := make([][]blocks.ID, m.ng)
	for g := range out {
		out[g] = []blocks.ID{}
		if len(s.path)*m.unit < hitTokens || !m.participates(g) {
			continue
		}
		n := hitTokens / m.bs[g]
		skip := min(m.specs[g].Skipped(hitTokens)/m.bs[g], n)
		for i := range n {
			if i < skip {
				out[g] = append(out[g], blocks.NullID)
			} else {
				out[g] = append(out[g], m.blockAt(s, g, i))
			}
		}
	}
	m.spare = append(m.spare, s)
	return out
}

func (m *Manager) participates(g int) bool {
	_, ignore := m.specs[g].(NonCacheable)
	return !ignore
}

// maxSeqTokens bounds Request.MaxTokens: no sum of positions below it may overflow (a
// sequence's slices are sized by it, bounded by the pool: Manager.preTokens).
const maxSeqTokens = math.MaxInt32

// Admit admits sequence id: it finds the prompt's hit (unless SkipCacheRead), counts what
// every group needs (the hit blocks it would take off the free queue included) and, only if
// the pool has it all, takes every group's hit blocks and then allocates the rest, in group
// order, as vLLM's allocate_slots. The prompt's full blocks are cached. It returns the hit
// in tokens. On error nothing changes.
func (m *Manager) Admit(id blocktable.SeqID, req *Request) (int, error) { return m.admit(id, req) }

// AdmitTiered is Admit for a Manager with lower tiers (Config.Tiers): past the device hit,
// the longest hit every group can serve from the lower tiers is loaded into blocks the
// sequence owns (AdmitResult.Load, which TakePlans hands out), and the sequence runs once
// CompleteTransfer confirms the load. Without tiers it is Admit.
func (m *Manager) AdmitTiered(id blocktable.SeqID, req *Request) (AdmitResult, error) {
	m.admitted = AdmitResult{}
	hit, err := m.admit(id, req)
	if err != nil {
		return AdmitResult{}, err
	}
	m.admitted.Hit = hit
	return m.admitted, nil
}

// admit is Admit; with lower tiers it also fills m.admitted's Load and Tiers (which
// AdmitTiered reads).
func (m *Manager) admit(id blocktable.SeqID, req *Request) (int, error) {
	if err := m.checkRequest("admit", id, req); err != nil {
		return 0, err
	}
	if _, ok := m.seqs[id]; ok {
		return 0, seqErr("admit", id, errDup)
	}
	if _, ok := m.swapped[id]; ok {
		return 0, seqErr("admit", id, errDup)
	}
	s := m.newSeq(req)
	n := len(req.Prompt)
	hit, full, slots, need := m.admitCount(s, req, nil)
	if need > m.st.free() {
		m.spare = append(m.spare, s)
		return 0, outOfBlocks("admit", id, need, m.st.free())
	}
	// Extend the matched path over the prompt's full units now, and pin its end, so that
	// the evictions below cannot free a node of it and commit need not walk it again.
	if m.cacheable {
		m.extend(s, n/m.unit)
	}
	if len(s.path) > 0 {
		s.pinned = s.path[len(s.path)-1]
		m.st.pin(s.pinned)
	}
	for g, spec := range m.specs {
		if full == 0 || !m.participates(g) {
			continue
		}
		hb := full / m.bs[g]
		skip := min(spec.Skipped(full)/m.bs[g], hb)
		dev := hb
		if full != hit {
			dev = m.deviceEnd(g, hit, full)
		}
		t := s.tables[g]
		for i := range dev {
			if i < skip {
				t = append(t, blocks.NullID)
			} else {
				t = append(t, m.blockAt(s, g, i))
			}
		}
		if m.fa.on { // guarded here: the slice costs a bounds check (freeable.go)
			m.taking(s, g, t[skip:dev])
		}
		m.st.takeTable(t[skip:dev], m.skips[g])
		if m.st.tiers != nil {
			m.st.hitRun(t[skip:dev])
			m.admitted.Tiers.Blocks[prefix.Device] += dev - skip
		}
		s.tables[g], s.numCached[g] = t, dev
	}
	if full != hit && m.anyAlign {
		m.loadStates(s, hit, full) // tiers.go
	}
	m.grow(s, slots, slots)
	s.id = id
	if full > hit {
		m.prepareLoad(s, hit, full, &m.admitted)
		s.loadResumed = req.Resumed
	}
	m.commit(s, slots)
	s.computed = slots
	m.clock++
	s.arrival, s.hit = m.clock, hit
	m.seqs[id] = s
	s.id = id
	m.orderPush(s)
	m.lastID, m.lastSeq = id, s
	if req.Resumed {
		m.counters.ResumedHitTokens += uint64(hit)
		m.counters.ResumedPromptTokens += uint64(n)
	} else {
		m.counters.HitTokens += uint64(hit)
		m.counters.PromptTokens += uint64(n)
	}
	if invariant.Enabled {
		invariant.Check(m.CheckInvariants)
	}
	return hit, nil
}

// grow allocates, group by group, the blocks s needs for tokens slots (main of them the
// model's own tokens, the rest lookahead). In each group the private copy of a shared,
// partly filled block that the next write lands in (after a Fork) is allocated first, then
// the new blocks; a Mamba align group gets only its running block, for main tokens.
func (m *Manager) grow(s *seq, tokens, main int) {
	for g := range m.specs {
		t := s.tables[g]
		if s.forked && tokens > s.computed {
			m.copyShared(s, g, t)
		}
		if m.anyAlign && m.align[g] {
			s.tables[g] = m.growAligned(s, g, t, main)
			continue
		}
		if n := m.ceil(g, tokens) - len(t); n > 0 {
			t = m.st.allocN(t, n)
			if m.fa.on { // guarded here: the slice costs a bounds check (freeable.go)
				m.holdAll(s, g, t[len(t)-n:])
			}
		}
		s.tables[g] = t
	}
	s.extent = max(s.extent, tokens)
}

// copyShared gives s a private copy of the shared block its next write in group g lands
// in, if there is one, and records the CopyOp.
func (m *Manager) copyShared(s *seq, g int, t []blocks.ID) {
	if i, ok := m.sharedWrite(s, g); ok {
		src := t[i]
		t[i] = m.st.alloc()
		m.hold(s, g, t[i])
		m.droppingOne(s, g, src)
		m.st.release(src) // still held by the fork: never unreferenced here
		m.copies = append(m.copies, CopyOp{Group: g, Src: src, Dst: t[i]})
		m.counters.CopyOnWrites++
	}
}

// commit caches s's full blocks up to tokens, group by group, and moves its pin to the
// deepest node of its path.
func (m *Manager) commit(s *seq, tokens int) {
	if ts := m.st.tiers; ts != nil && !ts.committing {
		m.commitTiered(s, tokens) // tiers.go
		return
	}
	units := 0
	for g := range m.specs {
		if !m.caches[g] {
			continue
		}
		full := m.div(g, tokens)
		if s.numCached[g] >= full {
			continue
		}
		units = max(units, full*m.k[g])
		m.extend(s, full*m.k[g])
		t := s.tables[g]
		if nc := s.numCached[g]; !m.sparse {
			m.st.cacheChain(g, t[nc:full], s.path[nc*m.k[g]:], m.k[g])
		} else {
			for i := nc; i < full; i++ {
				if t[i] != blocks.NullID && m.retained(s, g, i) {
					m.st.cache(t[i], s.path[(i+1)*m.k[g]-1], g)
				}
			}
		}
		s.numCached[g] = full
	}
	if units > 0 {
		if n := s.path[len(s.path)-1]; n != s.pinned {
			m.st.pin(n)
			m.st.unpin(s.pinned)
			s.pinned = n
		}
	}
	m.setQuiet(s)
}

// extend makes s.path cover units match units, creating nodes as needed.
func (m *Manager) extend(s *seq, units int) {
	for u := len(s.path); u < units; u++ {
		var parent prefix.Node
		if u == 0 {
			// Nothing of the sequence is in the tree yet, so nothing keeps its root: look
			// it up (or make it) now.
			s.root = m.st.root(s.ns, true)
			parent = s.root
		} else {
			parent = s.path[u-1]
		}
		s.path = append(s.path, m.st.ensure(parent, s.tokens[u*m.unit:(u+1)*m.unit]))
	}
}

// Append adds tokens to sequence id and gives them slots: every group first releases the
// blocks it no longer needs (wholly outside its window, from the tokens computed before
// this call, as vLLM frees them inside allocate_slots), then allocates for the new tokens,
// and newly full blocks are cached. A sequence still in a chunked prefill must Extend
// first. On error (out of blocks, too long, prefill pending) nothing changes.
func (m *Manager) Append(id blocktable.SeqID, tokens []int32) error {
	s, ok := m.lookup(id)
	if !ok {
		return m.missing("append", id)
	}
	if len(tokens) == 0 || len(tokens) > s.maxTokens-len(s.tokens) || s.computed != len(s.tokens) {
		return seqErr("append", id, errInvalid)
	}
	total := s.computed + len(tokens)
	if total <= s.quiet && !m.releases(s) {
		// The common decode step: no group allocates, caches or releases a block.
		s.tokens = append(s.tokens, tokens...)
		s.computed = total
		if m.progressOrder {
			m.orderFix(s)
		}
		return nil
	}
	if err := m.schedule(id, s, total, total); err != nil {
		return err
	}
	s.tokens = append(s.tokens, tokens...)
	s.computed = total
	m.orderFix(s)
	m.commit(s, total)
	if invariant.Enabled && invariant.Sample(64) {
		invariant.Check(m.CheckInvariants)
	}
	return nil
}

// Extend gives slots to the next n prompt tokens of sequence id that Admit left without
// (Request.Prefill): the next chunk of a chunked prefill. On error nothing changes.
func (m *Manager) Extend(id blocktable.SeqID, n int) error {
	s, ok := m.lookup(id)
	if !ok {
		return m.missing("extend", id)
	}
	if n <= 0 || n > len(s.tokens)-s.computed {
		return seqErr("extend", id, errInvalid)
	}
	if err := m.schedule(id, s, s.computed+n, s.computed+n); err != nil {
		return err
	}
	s.computed += n
	m.orderFix(s)
	m.commit(s, s.computed)
	return nil
}

// releases reports whether some group of s would release a block before the next step.
func (m *Manager) releases(s *seq) bool {
	for g, spec := range m.specs {
		if !m.skips[g] {
			continue
		}
		t := s.tables[g]
		if n := min(m.div(g, spec.Skipped(s.computed)), len(t)); n > 0 && t[n-1] != blocks.NullID {
			return true
		}
	}
	return false
}

// setQuiet recomputes s.quiet from its tables and cached counts. A sequence whose next
// write lands in a block shared by a fork has no quiet steps: it must copy first.
func (m *Manager) setQuiet(s *seq) {
	q := s.maxTokens
	for g := range m.specs {
		q = min(q, len(s.tables[g])*m.bs[g])
		if m.caches[g] {
			q = min(q, (s.numCached[g]+1)*m.bs[g]-1)
		}
	}
	if s.forked || m.anyAlign {
		q = m.unquiet(s, q)
	}
	s.quiet = q
}

// unquiet is setQuiet's rare case: no quiet steps for a sequence whose next write lands in
// a block a fork shares (it must copy first) or that holds a Mamba align last state (it is
// released at the next step).
func (m *Manager) unquiet(s *seq, q int) int {
	if s.forked && m.writesShared(s) || m.anyAlign && m.pendingState(s) {
		return 0
	}
	return q
}

// writesShared reports whether some group's next write of s lands in a shared block.
func (m *Manager) writesShared(s *seq) bool {
	for g := range m.specs {
		if _, shared := m.sharedWrite(s, g); shared {
			return true
		}
	}
	return false
}

// schedule releases what s no longer needs and allocates slots up to total tokens (main of
// them the model's own, the rest lookahead), or changes nothing if the pool cannot cover it
// (counting the blocks the release frees).
func (m *Manager) schedule(id blocktable.SeqID, s *seq, total, main int) error {
	want, freed := 0, 0
	for g, spec := range m.specs {
		t := s.tables[g]
		if !m.skips[g] {
		} else if sk := spec.Skipped(s.computed); sk > 0 {
			for i := min(m.div(g, sk), len(t)) - 1; i >= 0 && t[i] != blocks.NullID; i-- {
				if m.st.ref(t[i]) == 1 {
					freed++
				}
			}
		}
		want += max(m.ceil(g, total)-len(t), 0)
	}
	if s.forked || m.anyAlign {
		w, f := m.scheduleExtra(s, total, main)
		want, freed = want+w, freed+f
	}
	if want > m.st.free()+freed {
		return outOfBlocks("append", id, want, m.st.free()+freed)
	}
	m.releaseSkipped(s)
	m.grow(s, total, main)
	return nil
}

// releaseSkipped releases, per group, the blocks wholly before what the group still needs,
// last first, and points their table entries at the null block.
func (m *Manager) releaseSkipped(s *seq) {
	for g, spec := range m.specs {
		if !m.skips[g] {
			continue
		}
		sk := spec.Skipped(s.computed)
		if sk <= 0 {
			continue
		}
		t := s.tables[g]
		end := min(m.div(g, sk), len(t))
		i := end
		for i > 0 && t[i-1] != blocks.NullID {
			i--
		}
		if i < end {
			if m.fa.on {
				m.dropping(s, g, t[i:end])
			}
			m.st.releaseWindow(t[i:end])
			clear(t[i:end])
		}
		if m.anyAlign && m.align[g] {
			m.releaseState(s, g)
		}
	}
}

// Finish ends sequence id: its cached blocks stay cached (and evictable once nobody holds
// them); every group releases its blocks last first, group by group, as vLLM's free. A
// sequence swapped out (Swap preemption) is finished as blocktable.Manager finishes one:
// its hold on the lower tiers is released (its copies there stay cached, evictable like
// any other) and the Manager forgets it, so that every later call on the ID, Resume
// included, fails with blocktable.ErrUnknownSeq until an Admit reuses it. Finish of an ID
// the Manager does not know fails with blocktable.ErrUnknownSeq, changing nothing.
func (m *Manager) Finish(id blocktable.SeqID) error {
	s, ok := m.lookup(id)
	if !ok {
		if rec, out := m.swapped[id]; out {
			delete(m.swapped, id) // swapped out: nothing held but its tokens and its hold
			m.releaseHold(id, rec.hold)
			m.swap.freeRec(rec, m.live())
			m.trimSpare()
			return nil
		}
		return seqErr("finish", id, errUnknown)
	}
	m.releaseAll(s)
	if len(m.copies) > 0 {
		m.dropStaleCopies()
	}
	m.drop(id, s)
	if invariant.Enabled && invariant.Sample(16) {
		invariant.Check(m.CheckInvariants)
	}
	return nil
}

// releaseAll releases every group's blocks of s, last first, group by group.
func (m *Manager) releaseAll(s *seq) {
	on := m.fa.on
	for g := range m.specs {
		if on {
			m.dropping(s, g, s.tables[g])
		}
		m.st.releaseTable(s.tables[g])
		s.tables[g] = s.tables[g][:0]
	}
	s.extent, s.resEnd = 0, 0
}

// drop forgets s once its blocks are released.
func (m *Manager) drop(id blocktable.SeqID, s *seq) {
	m.st.unpin(s.pinned)
	s.pinned = 0
	m.orderRemove(s)
	delete(m.seqs, id)
	m.lastSeq = nil
	m.spare = append(m.spare, s)
	m.trimSpare()
	m.swap.trimFree(m.live())
}

// trimSpare drops spare records past maxSpare when a sequence leaves (a drop leaves one
// sequence fewer and one record more: at most two past the bound; a swapped sequence
// finished, one sequence fewer). A record dropped goes to the collector with its
// buffers, its Freeable slot back to the accounting for the next record made.
func (m *Manager) trimSpare() {
	for n := len(m.spare); n > m.maxSpare(); n-- {
		m.freeSlot(m.spare[n-1].slot)
		m.spare[n-1] = nil
		m.spare = m.spare[:n-1]
	}
}

// maxSpare bounds the spare records: one for each sequence the Manager has, running or
// swapped out (a swapped one's Resume takes a record), which a steady batch that
// finishes and admits in turn reuses, plus one, so that the last sequence's finish keeps
// a record for the next admission and a query on an idle Manager allocates nothing.
func (m *Manager) maxSpare() int { return m.live() + 1 }

// EvictBlocks drops the given blocks from the prefix index (vLLM's evict_blocks, used when
// a KV connector failed to load them): later lookups miss them on the device; a block a
// sequence holds stays in its table. Blocks that are not cached, and IDs outside the pool,
// are ignored. It drops device blocks only, as vLLM's evict_blocks drops them from the
// GPU block pool alone: a lower tier's copy of the same (prefix, group) (Config.Tiers)
// stays, since its KV was copied from a block that held it, and a lookup finds and loads
// it as before; a copy into a lower tier in flight from a dropped block completes. A load
// from a lower tier that fails evicts its keys from their tiers itself (CompleteTransfer).
func (m *Manager) EvictBlocks(ids []blocks.ID) {
	for _, b := range ids {
		m.st.drop(b)
	}
}

// Table returns sequence id's block table for group g (the null block where the group no
// longer needs the tokens) without a copy, as blocktable.Manager's Blocks: the slice is
// the Manager's own, valid until the next call that changes the Manager, so read it, do
// not write to it and do not keep it. It is clipped to its length, so that an append to
// it copies rather than writing into the room the table grows into. AppendTable gives a
// copy to change or keep.
func (m *Manager) Table(id blocktable.SeqID, g int) ([]blocks.ID, error) {
	t, err := m.table("table", id, g)
	return t[:len(t):len(t)], err
}

// AppendTable appends sequence id's block table for group g to dst and returns the
// extended slice: a copy, the caller's to change or keep. A dst with room allocates
// nothing. On error it returns dst and Table's error: blocktable.ErrUnknownSeq, or
// blocktable.ErrNotRunning for a sequence swapped out, or blocktable.ErrInvalidArgument
// for a group out of range (in a *blocktable.SeqError).
func (m *Manager) AppendTable(dst []blocks.ID, id blocktable.SeqID, g int) ([]blocks.ID, error) {
	t, err := m.table("table", id, g)
	return append(dst, t...), err
}

// table is the Manager's own slice of running sequence id's table for group g.
func (m *Manager) table(op string, id blocktable.SeqID, g int) ([]blocks.ID, error) {
	s, ok := m.lookup(id)
	if !ok {
		return nil, m.missing(op, id)
	}
	if g < 0 || g >= m.ng {
		return nil, seqErr(op, id, errInvalid)
	}
	return s.tables[g], nil
}

// Slot returns the slot (block ID x block size + offset) of token pos of sequence id in
// group g, the value a paged-attention kernel's slot mapping holds.
func (m *Manager) Slot(id blocktable.SeqID, g, pos int) (int64, error) {
	t, err := m.table("table", id, g)
	if err != nil {
		return 0, err
	}
	if pos < 0 || pos >= len(t)*m.bs[g] {
		return 0, seqErr("slot", id, errInvalid)
	}
	return int64(t[pos/m.bs[g]])*int64(m.bs[g]) + int64(pos%m.bs[g]), nil
}

// PackTables writes the tables of seqs for group g into dst, row i at dst[i*width:],
// padded with the null block: the batch block table a kernel reads. dst must hold
// len(seqs) x width entries and every table must fit in width.
func (m *Manager) PackTables(dst []blocks.ID, seqs []blocktable.SeqID, g, width int) error {
	if g < 0 || g >= m.ng || width < 0 || len(dst) < len(seqs)*width {
		return fmt.Errorf("%w: pack %d tables of width %d into %d", errInvalid, len(seqs), width, len(dst))
	}
	for _, id := range seqs {
		s, ok := m.seqs[id]
		if !ok {
			return m.missing("pack", id)
		}
		if len(s.tables[g]) > width {
			return seqErr("pack", id, errInvalid)
		}
	}
	for i, id := range seqs {
		row := dst[i*width : (i+1)*width]
		n := copy(row, m.seqs[id].tables[g])
		clear(row[n:])
	}
	return nil
}

// Stats returns the counters. Cached and CachedPrefixes are fresh slices the caller may
// keep (two allocations a call).
func (m *Manager) Stats() Stats {
	st := m.counters
	ts := m.st.t.Stats()
	st.Capacity, st.Free, st.Running = m.st.q.NumBlocks()-1, m.st.free(), len(m.seqs)
	// The tree's Stats slices are its own, overwritten by its next call: Stats' are fresh.
	st.Cached, st.CachedPrefixes, st.Nodes = slices.Clone(ts.Cached), slices.Clone(ts.Prefixes), ts.Nodes
	st.Evictions, st.Duplicates, st.Dropped = m.st.evictions, ts.Duplicates, m.st.dropped
	m.tierStats(&st)
	return st
}
