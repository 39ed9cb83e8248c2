package blocktable

import (
	"errors"
	"fmt"
	"math"
	"reflect"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/internal/poolrefs"
	"github.com/kvpage/kvpage/internal/trusted"
	"github.com/kvpage/kvpage/prefix"
)

// Manager is what a scheduler drives: it admits sequences against the prefix index,
// grows their block tables as they decode, commits their blocks to the index as they fill,
// and preempts, finishes and aborts them. It is not safe for concurrent use.
type Manager struct {
	cfg      Config
	pool     *blocks.Pool
	refs     []int32 // the pool's holder counts (internal/poolrefs): read only, by plan
	index    *prefix.Index
	bs       int
	clock    evict.Clock
	preempt  evict.Preemption
	wmBlocks int
	// maxSlots is the pool's capacity in tokens: no sequence's live slots can exceed it,
	// so every size a caller passes is checked against it before any arithmetic.
	maxSlots int

	// release is m.releaseBlocks bound once: a method value allocates each time it is made.
	release func([]blocks.ID) error

	seqs map[SeqID]*sequence
	// spare keeps finished sequences' records, with their token, table and input buffers,
	// for the next admissions, so that steady state allocates nothing. It keeps at most
	// one record more than the Manager has sequences (maxSpare): a server whose batch
	// shrinks after a burst gives the burst's records and buffers back as its sequences
	// finish, where it used to keep one for the most sequences ever alive, for as long as
	// the Manager lived; and a server that runs one sequence at a time still reuses one.
	spare []*sequence
	// last is the sequence the previous lookup found (nil after it is dropped): a scheduler
	// usually makes several calls in a row on one sequence (Append, then Slot or FillSlots
	// or FillRow; every chunk of a chunked prefill), and this skips the map for them.
	last *sequence
	// near caches sequences by the low bits of their ID (nil = empty; an entry is only
	// ever s at slot s.id&(len-1), cleared when s is dropped): a scheduler that appends to
	// every running sequence in turn misses last every time, and near answers most of those
	// lookups without the map's hashing and probing. It doubles while the running
	// sequences outnumber half its slots, up to maxNear.
	near []*sequence

	// ordered is the preemption policy when its order reads no Freeable: the running
	// sequences are then kept in its order (order.go), re-placed as they grow when
	// progressOrder is set.
	ordered       evict.OrderedPreemption
	progressOrder bool
	order         []*sequence
	frontier      []int32
	walked        []*sequence
	// tangled counts sequence records marked tangled (freeable.go): while it is 0 and no
	// sliding window is set, a sequence's Freeable is the suffix of its table nobody else holds.
	tangled  int
	fams     []family // fork families (freeable.go); fams[0] unused
	freeFams []int32
	// walkFreeable makes every Freeable planned, for tests comparing the shortcut with it.
	walkFreeable bool

	hits    []blocks.ID // scratch for matches
	infos   []evict.Candidate
	infoIDs []SeqID
	victims []int
	// Release plans (plan.go): the index's, or without an index, per block, sequence
	// holders and the plan generation that stamped them.
	rplan       prefix.ReleasePlan
	planHolders []int32
	planStamp   []uint32
	planGen     uint32

	st          Stats
	reclaimBase uint64 // pool's Reclaimed counter when the Manager was built
	mutations   uint64

	// loads maps each pending load transfer to its sequence (tiers.go).
	loads  map[prefix.TransferID]SeqID
	tiered bool // the index has lower tiers
	// swapIDs and gains are Preempt's scratch in Swap mode: the victims' blocks to hold,
	// and what each victim's release frees (preempt.go).
	swapIDs []blocks.ID
	gains   []int
	// steps counts NewStep calls (computed.go).
	steps uint64
}

// sequence is the Manager's record of one sequence.
//
// Its fields are ordered by when they are read, not by topic: a decode loop visits every
// running sequence each step, and a record's lines are cold again by its next visit.
// The first line holds what a decode step (lookup, step) and a decode commit
// (commitFull's plain path) read, the second the table's own hot fields (Table), the third
// what a block's fill reads in every run (markFresh, the table's sizes); the prompt and
// the rest follow. TestSequenceLayout keeps it so.
type sequence struct {
	id    SeqID
	state SeqState
	// plain marks a prompt with nothing but tokens: the default namespace, no multimodal
	// inputs, no retention and no retention ranges (setPrompt). Its decode commits take
	// the index's plain path, which reads none of the prompt's two lines.
	plain bool
	// stale marks a sequence computed with the weights of an earlier epoch of its
	// namespace (epoch.go), or one holding a block EvictBlocks dropped (evictblocks.go):
	// it commits nothing more.
	stale bool
	// dup marks a sequence one of whose commits found a duplicate (or an evicted prefix):
	// its cursor may stand on a block it does not hold. tangled marks one that committed a
	// block under such a cursor, alone; fam is its fork family (0: none), which carries the
	// mark for all its members instead (freeable.go).
	dup, tangled bool
	resumed      bool
	tokens       []int32
	cur          prefix.Cursor
	t            Table
	// loading is the load transfer of the blocks after its device hit (tiers.go), 0 for
	// none: until it completes those blocks hold no KV, and nothing past the hit commits.
	loading prefix.TransferID
	// fresh is how many of its tokens had their KV computed when a block of it first
	// filled in the step freshStep names (NewStep calls + 1; computed.go).
	fresh      int
	freshStep  uint64
	loadBlocks int
	prompt     prefix.Prompt // Namespace, MM, and Tokens = tokens, for the index (setPrompt)
	hit        int
	// promptLen is the prompt's length at admission: tokens past it are decode output.
	promptLen int
	priority  int
	arrival   uint64
	pos       int32 // position in Manager.order, -1 when not in it
	fam       int32
	info      evict.Candidate // scratch for the ordered policy's comparisons (order.go)
	// hold keeps a swapped sequence's KV in the lower tiers until it resumes, finishes
	// or is aborted (tiers.go).
	hold prefix.HoldID
}

// setPlain records whether s's prompt is plain (see sequence.plain): call it after every
// change of the prompt's namespace, inputs or retention.
func (s *sequence) setPlain() { s.plain = isPlain(&s.prompt) }

// isPlain reports whether p has nothing but tokens: the default namespace, no multimodal
// inputs, no retention and no retention ranges.
func isPlain(p *prefix.Prompt) bool {
	return p.Namespace == (prefix.Namespace{}) && len(p.MM) == 0 && p.Retention == (prefix.Retention{}) &&
		len(p.RetentionRanges) == 0
}

// committed is how many of the sequence's blocks lie on its path in the index.
func (s *sequence) committed() int { return s.cur.Blocks() }

// New returns a Manager over cfg.Pool (and cfg.Index, when set). With an Index, Pool,
// BlockSize and Clock may be left zero and are taken from it; set, they must be the
// index's own (the same pool, block size and clock), or New fails with ErrInvalidArgument
// rather than let a later call break an invariant. Every size is checked: a block size
// outside [1, prefix.MaxBlockSize], a watermark outside [0, 1) (NaN included), a negative
// window. A sliding window with an Index fails with
// ErrWindowWithIndex: the window's prefix caching is blocktable/hybrid's.
func New(cfg Config) (*Manager, error) {
	if x := cfg.Index; x != nil {
		switch {
		case cfg.Pool == nil:
			cfg.Pool = x.Pool()
		case cfg.Pool != x.Pool():
			return nil, fmt.Errorf("%w: Config.Pool is not the pool Config.Index caches", ErrInvalidArgument)
		}
		switch {
		case cfg.BlockSize == 0:
			cfg.BlockSize = x.BlockSize()
		case cfg.BlockSize != x.BlockSize():
			return nil, fmt.Errorf("%w: block size %d, the index's is %d", ErrInvalidArgument, cfg.BlockSize, x.BlockSize())
		}
		switch {
		case cfg.Clock == nil:
			cfg.Clock = x.Clock()
		case !sameClock(cfg.Clock, x.Clock()):
			return nil, fmt.Errorf("%w: Config.Clock is not the index's clock (leave it nil to share the index's)", ErrInvalidArgument)
		}
	}
	switch {
	case cfg.Pool == nil:
		return nil, fmt.Errorf("%w: Config.Pool is nil", ErrInvalidArgument)
	case cfg.BlockSize <= 0 || cfg.BlockSize > prefix.MaxBlockSize:
		return nil, &SizeError{Op: "new", What: "block size", N: cfg.BlockSize, Max: prefix.MaxBlockSize}
	case !(cfg.Watermark >= 0 && cfg.Watermark < 1): // NaN fails both comparisons
		return nil, fmt.Errorf("%w: watermark %v outside [0, 1)", ErrInvalidArgument, cfg.Watermark)
	case cfg.SlidingWindow < 0:
		return nil, fmt.Errorf("%w: sliding window %d", ErrInvalidArgument, cfg.SlidingWindow)
	case cfg.SlidingWindow > 0 && cfg.Index != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, ErrWindowWithIndex)
	case cfg.SlidingWindow > 0 && !cfg.Pool.HasNullBlock():
		return nil, fmt.Errorf("%w: a sliding window needs a pool with a null block", ErrInvalidArgument)
	}
	m := &Manager{
		cfg:      cfg,
		pool:     cfg.Pool,
		refs:     poolrefs.Of(cfg.Pool),
		index:    cfg.Index,
		bs:       cfg.BlockSize,
		clock:    cfg.Clock,
		preempt:  cfg.Preemption,
		wmBlocks: int(cfg.Watermark * float64(cfg.Pool.Capacity())),
		// Capacity < 2^31 and BlockSize <= 2^16: no overflow in an int64.
		maxSlots: int(min(int64(cfg.Pool.Capacity())*int64(cfg.BlockSize), math.MaxInt)),
		seqs:     make(map[SeqID]*sequence),
		near:     make([]*sequence, 64),
	}
	m.release = m.releaseBlocks
	if m.clock == nil {
		m.clock = &evict.Counter{}
	}
	if m.preempt == nil {
		m.preempt = evict.NewFCFSPreemption()
	}
	if o, ok := m.preempt.(evict.OrderedPreemption); ok {
		m.ordered, m.progressOrder = o, o.ReadsProgress()
	}
	m.reclaimBase = m.pool.Stats().Reclaimed
	m.tiered = m.caching() && cfg.Index.NumTiers() > 1
	return m, nil
}

// sameClock reports whether a and b are one clock, without panicking on a clock type that
// cannot be compared (such a clock passed twice counts as two).
func sameClock(a, b evict.Clock) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// Config returns the configuration the Manager was built with.
func (m *Manager) Config() Config { return m.cfg }

func (m *Manager) caching() bool { return m.index != nil } // New refuses an index with a window

func (m *Manager) releaseBlocks(ids []blocks.ID) error {
	if m.index != nil {
		// The table holds each of ids once: the index need not check it (internal/trusted).
		trusted.ReleaseHeld(m.index, ids)
		return nil
	}
	return m.pool.Release(ids...)
}

// newSequence returns a reset sequence record, reused when possible.
func (m *Manager) newSequence(id SeqID) *sequence {
	var s *sequence
	if n := len(m.spare); n > 0 {
		s = m.spare[n-1]
		m.spare[n-1] = nil // the list's array keeps no record it no longer owns
		m.spare = m.spare[:n-1]
	} else {
		s = &sequence{}
	}
	tokens, ids, mm := s.tokens[:0], s.t.ids[:0], s.prompt.MM[:0]
	*s = sequence{id: id, state: Running, tokens: tokens, pos: -1}
	s.prompt.MM = mm // the record's own buffer for its inputs (ownMM)
	s.t = Table{pool: m.pool, bs: m.bs, window: m.cfg.SlidingWindow, ids: ids, release: m.release}
	return s
}

// recycle keeps s, a record no sequence uses any more, for reuse, and trims the spare
// records to maxSpare: a record past it goes to the collector with its buffers.
func (m *Manager) recycle(s *sequence) {
	poisonRecord(s)
	mm := s.prompt.MM
	clear(mm) // no hash strings kept alive by a spare record
	s.prompt = prefix.Prompt{MM: mm[:0]}
	s.t.release = nil
	m.spare = append(m.spare, s)
	// A drop leaves one sequence fewer and one record more: at most two past the bound.
	for n := len(m.spare); n > m.maxSpare(); n-- {
		m.spare[n-1] = nil
		m.spare = m.spare[:n-1]
	}
}

// maxSpare bounds the spare records: one for each sequence the Manager has (running or
// swapped), which a steady batch that finishes and admits in turn reuses, plus one, so
// that the last sequence's finish keeps a record for the next admission.
func (m *Manager) maxSpare() int { return len(m.seqs) + 1 }

func (m *Manager) lookup(op string, id SeqID) (*sequence, error) {
	if s := m.last; s != nil && s.id == id {
		return s, nil
	}
	if s := m.near[uint64(id)&uint64(len(m.near)-1)]; s != nil && s.id == id {
		m.last = s
		return s, nil
	}
	s, ok := m.seqs[id]
	if !ok {
		return nil, &SeqError{Op: op, Seq: id, Err: ErrUnknownSeq}
	}
	m.last = s
	m.near[uint64(id)&uint64(len(m.near)-1)] = s
	return s, nil
}

// maxNear bounds the near cache: 64K entries, 512 KiB.
const maxNear = 1 << 16

// file adds s to the sequences and the near cache.
func (m *Manager) file(s *sequence) {
	m.seqs[s.id] = s
	if n := len(m.near); len(m.seqs) > n/2 && n < maxNear {
		m.near = make([]*sequence, 2*n)
		for id, t := range m.seqs {
			m.near[uint64(id)&uint64(2*n-1)] = t
		}
	}
	m.near[uint64(s.id)&uint64(len(m.near)-1)] = s
}

func (m *Manager) running(op string, id SeqID) (*sequence, error) {
	s, err := m.lookup(op, id)
	if err != nil {
		return nil, err
	}
	if s.state != Running {
		return nil, &SeqError{Op: op, Seq: id, Err: ErrNotRunning}
	}
	return s, nil
}

// mmWithin reports whether multimodal inputs are sorted by Offset and lie within a prompt
// of n tokens (no sum overflows: Length <= n - Offset). An input out of order or past the
// prompt would leave blocks it overlaps without its hash, so that they match another
// prompt's with the same placeholder tokens and a different image.
func mmWithin(mm []prefix.MMInput, n int) bool {
	prev := 0
	for _, m := range mm {
		if m.Offset < prev || m.Offset > n || m.Length < 0 || m.Length > n-m.Offset {
			return false
		}
		prev = m.Offset
	}
	return true
}

// admitPlan is what Admit will do, computed before anything changes.
type admitPlan struct {
	res    AdmitResult
	hits   []blocks.ID
	prompt prefix.Prompt // what was matched, for RecordLookup once admitted
	cur    prefix.Cursor
	need   int // blocks to allocate
	tokens int // prompt tokens that get slots now
	load   int // blocks after the hit that lower tiers hold (tiers.go)
}

func (m *Manager) plan(seq SeqID, req *Request) (admitPlan, error) {
	var p admitPlan
	if _, dup := m.seqs[seq]; dup {
		return p, &SeqError{Op: "admit", Seq: seq, Err: ErrDuplicateSeq}
	}
	if req == nil || len(req.Prompt) == 0 || req.Prefill < 0 || req.Lookahead < 0 || req.MaxTokens < 0 || !mmWithin(req.MM, len(req.Prompt)) {
		return p, &SeqError{Op: "admit", Seq: seq, Err: ErrInvalidArgument}
	}
	if err := req.Retention.Validate(); err != nil {
		return p, &SeqError{Op: "admit", Seq: seq, Err: err}
	}
	// Sizes first, against the pool's capacity in slots, so that no sum below overflows
	// and no request the pool could never hold is mistaken for one that must wait.
	if m.cfg.SlidingWindow == 0 {
		if len(req.Prompt) > m.maxSlots {
			return p, &SizeError{Op: "admit", Seq: seq, What: "prompt tokens", N: len(req.Prompt), Max: m.maxSlots}
		}
		if req.MaxTokens > m.maxSlots {
			return p, &SizeError{Op: "admit", Seq: seq, What: "max tokens", N: req.MaxTokens, Max: m.maxSlots}
		}
	}
	if m.caching() {
		// Peek: CanAdmit and refused admissions must not count as lookups in the index's
		// hit-rate statistics; Admit records the lookup once it succeeds.
		p.prompt = prefix.Prompt{Namespace: req.Namespace, Tokens: req.Prompt, MM: req.MM}
		m.hits, p.cur = m.index.Peek(m.hits[:0], &p.prompt, prefix.HitLimit(!m.cfg.FullPromptHit))
		p.hits = m.hits
	}
	hitTokens := len(p.hits) * m.bs
	p.tokens = max(len(req.Prompt), hitTokens)
	if req.Prefill > 0 && req.Prefill < p.tokens-hitTokens { // no hitTokens+Prefill: it may overflow
		p.tokens = hitTokens + req.Prefill
	}
	if p.tokens > m.maxSlots {
		return p, &SizeError{Op: "admit", Seq: seq, What: "prefill tokens", N: p.tokens, Max: m.maxSlots}
	}
	if req.Lookahead > m.maxSlots-p.tokens {
		return p, &SizeError{Op: "admit", Seq: seq, What: "lookahead", N: req.Lookahead, Max: m.maxSlots - p.tokens}
	}
	if id, full := atMaxRefs(m.refs, p.hits); full {
		return p, &SeqError{Op: "admit", Seq: seq, Err: &blocks.BlockError{Op: "retain", ID: id, Err: blocks.ErrRefCountOverflow}}
	}
	p.need = ceilDiv(p.tokens+req.Lookahead, m.bs) - len(p.hits)
	p.res = AdmitResult{HitTokens: hitTokens, HitBlocks: len(p.hits), NewBlocks: p.need, Tokens: p.tokens}
	if m.tiered {
		m.planLoad(&p)
	}

	// Hit blocks that are evictable now will not be once taken: count them out of what an
	// allocation can have (vLLM's test_prefill_not_enough_free_blocks_with_computed_blocks).
	// Counting them is a pass over the hit, needed only when memory is tight: if the
	// request fits even with every hit block counted as taken, the exact count cannot
	// change the answer.
	avail := m.pool.Available()
	if len(p.hits) > 0 && p.need+m.wmBlocks > avail-len(p.hits) {
		avail -= m.index.ReclaimableOf(p.hits)
	}
	if p.need+m.wmBlocks > avail {
		return p, &SeqError{Op: "admit", Seq: seq, Err: &blocks.OutOfBlocksError{Requested: p.need + m.wmBlocks, Available: avail}}
	}
	return p, nil
}

// atMaxRefs returns the first of hits (matched blocks: valid IDs of this pool) that holds
// blocks.MaxRefCount references, which one more holder would overflow. A loop over every
// hit block of every admission, kept out of line so that its code does not move with
// plan's: the assembler pads a loop whose branches land across a 32-byte boundary
// (Intel's jump erratum) with NOPs, two an iteration here when plan's code last shifted.
//
//go:noinline
func atMaxRefs(refs []int32, hits []blocks.ID) (blocks.ID, bool) {
	for _, id := range hits {
		if refs[id] == blocks.MaxRefCount {
			return id, true
		}
	}
	return 0, false
}

// Admit admits seq with req: it matches the prompt against the prefix index, takes the hit
// blocks and allocates the rest (prefill and lookahead), counting before it changes
// anything every block it needs, cached blocks it would take off the evictable set
// included. The prompt's full blocks are committed to the index at once, so concurrent
// requests hit them. It is all or nothing: on failure nothing changed, and an
// *blocks.OutOfBlocksError (errors.Is blocks.ErrOutOfBlocks) says how many blocks were missing.
func (m *Manager) Admit(seq SeqID, req *Request) (AdmitResult, error) {
	p, err := m.plan(seq, req)
	if err != nil {
		if errors.Is(err, blocks.ErrOutOfBlocks) {
			m.st.RejectedAdmissions++
		}
		return AdmitResult{}, err
	}
	s := m.newSequence(seq)
	s.priority = req.Priority
	s.arrival = m.clock.Tick()
	s.hit = p.res.HitTokens
	s.fresh, s.freshStep = s.hit, m.steps+1 // only the hit is computed until the step runs
	s.promptLen = len(req.Prompt)
	hint := min(req.MaxTokens, m.maxSlots) // a window's sequences may outgrow the pool: a hint only
	if hint > cap(s.tokens) {
		s.tokens = make([]int32, 0, hint)
	}
	if nb := ceilDiv(max(hint, p.tokens+req.Lookahead), m.bs); nb > cap(s.t.ids) {
		s.t.ids = make([]blocks.ID, 0, nb)
	}
	s.tokens = append(s.tokens, req.Prompt[:p.tokens]...)
	s.prompt = prefix.Prompt{Namespace: req.Namespace, Tokens: s.tokens, MM: ownMM(s.prompt.MM, req.MM), Retention: req.Retention}
	s.setPlain()

	if len(p.hits) > 0 {
		// Peek matched them just now and plan checked their refcounts (internal/trusted).
		trusted.AcquireMatched(m.index, p.hits)
		s.t.ids = append(s.t.ids, p.hits...)
		s.t.tokens = len(p.hits) * m.bs
		s.t.resetRoom()
	}
	s.cur = p.cur // at the end of the hit; the zero Cursor (the namespace's root) without one
	if m.caching() {
		if req.Resumed {
			m.index.RecordResumedLookup(&p.prompt, p.cur)
		} else {
			m.index.RecordLookup(&p.prompt, p.cur)
			if m.tiered {
				m.index.RecordTierLookup(p.res.Tiers)
			}
		}
	}
	if _, err := s.t.Append(p.tokens-s.t.tokens, req.Lookahead); err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: admission counted %d blocks but allocation failed: %v", p.need, err))
	}
	if p.load > 0 {
		m.prepareLoad(s, &p, req.Resumed)
	}
	m.commitFull(s)
	m.file(s)
	m.orderPush(s)
	m.st.Admitted++
	if req.Resumed {
		m.st.ResumedAdmitted++
		m.st.ResumedPromptTokens += uint64(len(req.Prompt))
		m.st.ResumedHitTokens += uint64(p.res.HitTokens)
	} else {
		m.st.PromptTokens += uint64(len(req.Prompt))
		m.st.HitTokens += uint64(p.res.HitTokens)
	}
	m.check()
	return p.res, nil
}

// CanAdmit answers what Admit would, changing nothing: the result, or the error.
func (m *Manager) CanAdmit(seq SeqID, req *Request) (AdmitResult, error) {
	p, err := m.plan(seq, req)
	if err != nil {
		return AdmitResult{}, err
	}
	return p.res, nil
}

// commitFull commits the sequence's full blocks that are not yet on its path in the index
// and returns how many it passed to the index.
func (m *Manager) commitFull(s *sequence) int {
	if !m.caching() || s.stale || s.loading != 0 {
		return 0
	}
	from := s.committed()
	if len(s.tokens) < (from+1)*m.bs {
		return 0 // the common decode step: no new full block, and no division to find out
	}
	full := len(s.tokens) / m.bs
	if full == from+1 && s.plain && !s.dup && trusted.CommitNext(m.index, &s.cur, s.tokens, s.t.ids[from]) {
		return 1 // a decode step's block: nothing read of the prompt (sequence.plain)
	}
	s.prompt.Tokens = s.tokens
	res, err := m.commitHeld(s, s.t.ids[from:full])
	if err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: committing seq %d blocks [%d, %d) failed: %v", s.id, from, full, err))
	}
	if res.Duplicates > 0 || res.Orphaned > 0 || s.dup {
		m.committedUnder(s, res.Stored, res.Duplicates, res.Orphaned)
	}
	if res.Orphaned > 0 {
		// After a duplicate the cursor sits on the index's own copy of a block, which this
		// sequence does not hold; if that path was evicted since, the index detached the
		// cursor and cached nothing. Find the longest cached path along the tokens again and
		// cache the sequence's own blocks past it, so that it keeps sharing what it computes.
		m.rematch(s, full)
		if again := s.committed(); again < full {
			res, err = m.commitHeld(s, s.t.ids[again:full])
			if err != nil || res.Orphaned > 0 {
				panic(fmt.Sprintf("kvpage: broken invariant: recommitting seq %d blocks [%d, %d): %+v, %v", s.id, again, full, res, err))
			}
		}
	}
	return full - from
}

// commitHeld commits ids, blocks of s's table, at s's cursor. The table holds each of them
// once, so the index need not check that it does (internal/trusted).
func (m *Manager) commitHeld(s *sequence, ids []blocks.ID) (prefix.CommitResult, error) {
	var res prefix.CommitResult
	var err error
	res.Stored, res.Duplicates, res.Orphaned, err = trusted.CommitHeld(m.index, &s.cur, &s.prompt, ids)
	return res, err
}

// rematch re-derives the sequence's cursor from the tree for its first upto blocks: the
// longest cached path along its tokens. Blocks past it are the sequence's own, uncached
// (a cached block it holds keeps its whole path cached), so they can be committed again.
func (m *Manager) rematch(s *sequence, upto int) {
	p := prefix.Prompt{Namespace: s.prompt.Namespace, Tokens: s.tokens[:upto*m.bs], MM: s.prompt.MM}
	m.hits, s.cur = m.index.Peek(m.hits[:0], &p, prefix.WholePrompt) // a re-match, not a new lookup
}

// Append appends tokens to a running sequence (one decode step, or a prefill chunk, or
// accepted draft tokens) and reserves lookahead slots beyond them. Blocks are allocated
// only when the last one is full; each block that fills is committed to the prefix index
// at once, so concurrent requests can hit it. The first write into a shared block copies
// it (see AppendResult.Copy). All or nothing: on blocks.ErrOutOfBlocks nothing changed; the
// caller preempts (Preempt) and retries. Append allocates no memory in steady state.
// A decode loop appending one token at a time may call AppendToken instead.
func (m *Manager) Append(seq SeqID, tokens []int32, lookahead int) (AppendResult, error) {
	// A decode step of the sequence the previous call named, into its own last block with
	// room: most calls, kept small enough to stay cheap.
	if s := m.last; s != nil && s.id == seq && len(tokens) == 1 && lookahead == 0 && s.t.room > 0 {
		if m.step(s, tokens[0]) {
			return m.appended(s, AppendResult{}), nil
		}
		m.check()
		return AppendResult{}, nil
	}
	return m.appendSlow(seq, tokens, lookahead)
}

// AppendToken is Append(seq, []int32{token}, 0), the decode step of a server's decode
// loop: the same result, the same errors (the state unchanged on each), without a slice
// to build or lengths to check. Like Append it allocates no memory in steady state.
func (m *Manager) AppendToken(seq SeqID, token int32) (AppendResult, error) {
	if s := m.last; s != nil && s.id == seq && s.t.room > 0 {
		if m.step(s, token) {
			return m.appended(s, AppendResult{}), nil
		}
		m.check()
		return AppendResult{}, nil
	}
	return m.appendTokenSlow(seq, token)
}

// appendTokenSlow is AppendToken for every other case: another sequence than the last
// call's (a batch's decode loop), a new block, a copy-on-write, a refusal.
func (m *Manager) appendTokenSlow(seq SeqID, token int32) (AppendResult, error) {
	s, err := m.running("append", seq)
	if err != nil {
		return AppendResult{}, err
	}
	if s.t.room > 0 {
		if m.step(s, token) {
			return m.appended(s, AppendResult{}), nil
		}
		m.check()
		return AppendResult{}, nil
	}
	if res, ok := s.t.appendInNew(); ok {
		s.tokens = append(s.tokens, token)
		return m.appended(s, res), nil
	}
	one := [1]int32{token}
	return m.appendTo(s, one[:], 0)
}

// step appends token to s, the sequence of the previous call, whose table has room: the
// token lands in the table's own last block, which holds no reserved slot and lies in no
// window (Table.room). A table with room belongs to a running sequence (a swap or a
// preemption releases the table, which forgets room), and every full block before its
// last one is committed already, unless the sequence is stale or loading, which commit
// nothing (CheckInvariants). So only a block this token fills needs appended's commit,
// and a preemption order that reads progress its update: step reports whether either is
// due.
func (m *Manager) step(s *sequence, token int32) bool {
	if invariant.Enabled {
		m.checkStep(s)
	}
	s.t.room--
	s.t.tokens++
	s.tokens = append(s.tokens, token) // no memmove call for 4 bytes
	return s.t.room == 0 || m.progressOrder
}

// checkStep checks, under the kvinvariants build tag, what step does not: that s runs.
func (m *Manager) checkStep(s *sequence) {
	if s.state != Running {
		panic(fmt.Sprintf("kvpage: broken invariant: seq %d has room in its table but is not running", s.id))
	}
}

// appendSlow is Append for every other case: another sequence, several tokens, lookahead,
// a new block or a copy-on-write.
func (m *Manager) appendSlow(seq SeqID, tokens []int32, lookahead int) (AppendResult, error) {
	s, err := m.running("append", seq)
	if err != nil {
		return AppendResult{}, err
	}
	return m.appendTo(s, tokens, lookahead)
}

// appendTo is Append to s, a running sequence.
func (m *Manager) appendTo(s *sequence, tokens []int32, lookahead int) (AppendResult, error) {
	var res AppendResult
	var err error
	if lookahead != 0 || !s.t.appendInLast(len(tokens)) {
		if res, err = s.t.Append(len(tokens), lookahead); err != nil {
			switch e := err.(type) {
			case *SeqError: // out of blocks: the Table knows no sequence
				e.Seq = s.id
			case *SizeError:
				e.Seq = s.id
			}
			return res, err
		}
	}
	if res.Copied {
		m.st.CopyOnWrites++
	}
	s.tokens = append(s.tokens, tokens...)
	return m.appended(s, res), nil
}

// appended finishes an Append once s holds its new tokens: it commits the blocks that
// filled and re-places s in a preemption order that reads progress.
func (m *Manager) appended(s *sequence, res AppendResult) AppendResult {
	if len(s.tokens) >= (s.committed()+1)*m.bs { // a block filled: otherwise no call
		m.markFresh(s, s.committed()*m.bs) // this step's tokens lie past the committed blocks
		res.Committed = m.commitFull(s)
	}
	if m.progressOrder {
		m.orderFix(s)
	}
	m.check()
	return res
}

// Finish commits seq's full blocks to the prefix index and releases all of its blocks;
// cached blocks become evictable once nobody holds them. The ID is then free for reuse.
// A swapped sequence is finished like Abort (its KV is in the lower tiers), its hold
// released.
func (m *Manager) Finish(seq SeqID) error {
	s, err := m.lookup("finish", seq)
	if err != nil {
		return err
	}
	if s.state == Running {
		m.commitFull(s)
	}
	m.drop(s)
	m.st.Finished++
	m.check()
	return nil
}

// Abort releases all of seq's blocks without committing anything more (blocks already
// committed stay cached). A swapped sequence's hold on the lower tiers is released: its
// blocks there become evictable.
func (m *Manager) Abort(seq SeqID) error {
	s, err := m.lookup("abort", seq)
	if err != nil {
		return err
	}
	m.drop(s)
	m.st.Aborted++
	m.check()
	return nil
}

// drop releases everything s holds and forgets it.
func (m *Manager) drop(s *sequence) {
	if s.state == Swapped {
		m.releaseHold(s)
	} else if err := s.t.Release(); err != nil {
		panic(fmt.Sprintf("kvpage: broken invariant: releasing seq %d: %v", s.id, err))
	}
	m.orderRemove(s)
	m.leaveUnit(s)
	delete(m.seqs, s.id)
	if slot := uint64(s.id) & uint64(len(m.near)-1); m.near[slot] == s {
		m.near[slot] = nil
	}
	if m.last == s {
		m.last = nil
	}
	m.recycle(s)
}

// Fork makes child a copy of the running sequence parent that shares all of its blocks
// (parallel sampling, beam search). The first write by either into a shared, partly
// filled block copies it. It fails with ErrUnknownSeq if parent is missing,
// ErrDuplicateSeq if child exists, and ErrNotRunning while parent's load from a lower
// tier is in flight. It allocates no block.
func (m *Manager) Fork(parent, child SeqID) error {
	p, err := m.running("fork", parent)
	if err != nil {
		return err
	}
	if _, dup := m.seqs[child]; dup {
		return &SeqError{Op: "fork", Seq: child, Err: ErrDuplicateSeq}
	}
	if p.loading != 0 {
		return &SeqError{Op: "fork", Seq: parent, Err: ErrNotRunning} // its KV is still loading (tiers.go)
	}
	c := m.newSequence(child)
	if err := p.t.forkInto(&c.t); err != nil {
		m.recycle(c)
		return err
	}
	c.tokens = append(c.tokens, p.tokens...)
	mm := c.prompt.MM
	c.prompt = p.prompt
	c.prompt.Tokens = c.tokens
	c.prompt.MM = ownMM(mm, p.prompt.MM) // its own: p's record may be reused while c lives
	c.setPlain()
	c.cur = p.cur
	c.hit, c.priority, c.promptLen = p.hit, p.priority, p.promptLen
	c.dup = p.dup
	c.fresh, c.freshStep = p.fresh, p.freshStep
	m.joinFamily(p, c)
	c.arrival = m.clock.Tick()
	m.file(c)
	m.orderPush(c)
	m.st.Forks++
	m.check()
	return nil
}

// Truncate cuts seq to n tokens (rejected speculative tokens) and releases the blocks no
// longer needed, lookahead reservations included. Blocks committed to the index stay
// cached; a later write into a kept shared or cached block copies it first.
//
// When it removes tokens (n below the sequence's length), the multimodal inputs
// (Request.MM) are cut with them: an input that starts at or past n is dropped, and one
// across n ends at n. Tokens appended afterwards are text: a block they fill takes the
// key of a prompt that never had what the cut removed (the plain-text key where no input
// remains in it). The blocks before the cut's block keep their keys; in the block the cut
// falls in, the cut input is renamed (its Hash with "\x00cut" and its length as cut), so
// that the block, whose tokens past n are text, never matches the same block of the whole
// input even when the tokens appended are its placeholders again. Inputs returns the
// inputs as cut. The caller's slice is not changed: the cut inputs are a copy, made only
// when the cut reaches an input. A chunked prefill cut short loses the inputs of its
// prompt's rest too, since the tokens appended next need not be that prompt's.
func (m *Manager) Truncate(seq SeqID, n int) error {
	s, err := m.running("truncate", seq)
	if err != nil {
		return err
	}
	if err := s.t.Truncate(n); err != nil {
		return &SeqError{Op: "truncate", Seq: seq, Err: err}
	}
	if n < len(s.tokens) && len(s.prompt.MM) > 0 {
		s.prompt.MM = ownMM(s.prompt.MM, mmUpTo(s.prompt.MM, n, m.bs))
		s.setPlain()
	}
	poisonTokens(s.tokens[n:])
	s.tokens = s.tokens[:n]
	s.prompt.Tokens = s.tokens
	if s.freshStep == m.steps+1 {
		s.fresh = min(s.fresh, n) // tokens given slots past the cut are this step's (computed.go)
	}
	if m.caching() && s.committed() > n/m.bs {
		m.rematch(s, n/m.bs)
	}
	m.orderFix(s)
	m.check()
	return nil
}

func (m *Manager) check() {
	if !invariant.Enabled {
		return
	}
	m.mutations++
	if invariant.Sample(m.mutations) {
		invariant.Check(m.CheckInvariants)
	}
}
