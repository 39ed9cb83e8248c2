package blocktable

import (
	"slices"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// stack is a pool, an index and a Manager built for one test.
type stack struct {
	m    *Manager
	pool *blocks.Pool
	idx  *prefix.Index
}

// newStack builds a stack with usable blocks of bs tokens; cfg's Pool, Index, BlockSize
// and Clock are filled in. Every test ends with s.done, the leak check.
func newStack(t *testing.T, usable, bs int, cfg Config) *stack {
	t.Helper()
	pool := newPool(t, usable+1)
	clock := &evict.Counter{}
	idx, err := prefix.New(pool, bs, prefix.WithClock(clock))
	require.NoError(t, err)
	cfg.Pool, cfg.Index, cfg.BlockSize, cfg.Clock = pool, idx, bs, clock
	m, err := New(cfg)
	require.NoError(t, err)
	return &stack{m: m, pool: pool, idx: idx}
}

// done finishes every sequence and checks that nothing leaked: invariants hold, and once
// the cache is dropped every block is free (host blocks too).
func (s *stack) done(t *testing.T) {
	t.Helper()
	require.NoError(t, s.m.CheckInvariants())
	for _, id := range s.m.Seqs(nil) {
		require.NoError(t, s.m.Finish(id))
	}
	require.NoError(t, s.m.CheckInvariants())
	if s.idx.NumTiers() > 1 {
		s.completeAll(t, true)
		for range s.idx.NumTiers() { // stores cascade one tier per round
			s.completeAll(t, true)
		}
		for t1 := prefix.Tier(1); int(t1) < s.idx.NumTiers(); t1++ {
			require.Zero(t, s.idx.TierStatsOf(t1).Pending, "tier %d: copies left in flight", t1)
		}
	}
	st := s.m.Stats()
	require.Equal(t, st.Capacity, st.Free+st.Evictable, "blocks held after every sequence finished")
	require.Zero(t, st.HostInUse, "lower-tier blocks still held")
	require.NoError(t, s.idx.Reset())
	requireNoLeak(t, s.pool)
}

// state is everything observable about a Manager, for "a failed call changes nothing".
type state struct {
	Stats Stats
	Refs  []int
	Seqs  map[SeqID]SeqInfo
	Toks  map[SeqID][]int32
	Rows  map[SeqID][]blocks.ID
}

func (s *stack) state(t *testing.T) state {
	t.Helper()
	st := state{Stats: s.m.Stats(), Seqs: map[SeqID]SeqInfo{}, Toks: map[SeqID][]int32{}, Rows: map[SeqID][]blocks.ID{}}
	for i := range s.pool.NumBlocks() {
		st.Refs = append(st.Refs, s.pool.RefCount(blocks.ID(i)))
	}
	for _, id := range s.m.Seqs(nil) {
		info, err := s.m.Seq(id)
		require.NoError(t, err)
		st.Seqs[id] = info
		toks, err := s.m.Tokens(id)
		require.NoError(t, err)
		st.Toks[id] = slices.Clone(toks)
		st.Rows[id] = slices.Clone(s.m.seqs[id].t.ids)
	}
	return st
}

func seqOf(n int, base int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = base + int32(i)
	}
	return out
}

func TestManagerSharedPromptHitsWhileRunning(t *testing.T) {
	s := newStack(t, 32, 4, Config{})
	system := seqOf(20, 100) // five full blocks
	res, err := s.m.Admit(1, &Request{Prompt: system})
	require.NoError(t, err)
	require.Equal(t, AdmitResult{NewBlocks: 5, Tokens: 20}, res)
	// The prompt's full blocks are committed at admission: a concurrent request hits them
	// before the first one finishes.
	res, err = s.m.Admit(2, &Request{Prompt: append(slices.Clone(system), 7, 8, 9)})
	require.NoError(t, err)
	require.Equal(t, AdmitResult{HitTokens: 20, HitBlocks: 5, NewBlocks: 1, Tokens: 23}, res)
	// The very same prompt hits only four blocks: one token is left to compute.
	res, err = s.m.Admit(3, &Request{Prompt: system})
	require.NoError(t, err)
	require.Equal(t, 16, res.HitTokens)
	require.Equal(t, 1, res.NewBlocks)
	// Another namespace shares nothing.
	res, err = s.m.Admit(4, &Request{Prompt: system, Namespace: prefix.Namespace{LoRA: "a"}})
	require.NoError(t, err)
	require.Zero(t, res.HitTokens)
	st := s.m.Stats()
	require.Equal(t, uint64(83), st.PromptTokens)
	require.Equal(t, uint64(36), st.HitTokens)
	require.InDelta(t, 36.0/83, st.HitRate(), 1e-12)
	s.done(t)
}

func TestManagerFullPromptHit(t *testing.T) {
	s := newStack(t, 16, 4, Config{FullPromptHit: true})
	p := seqOf(8, 1)
	_, err := s.m.Admit(1, &Request{Prompt: p})
	require.NoError(t, err)
	res, err := s.m.Admit(2, &Request{Prompt: p})
	require.NoError(t, err)
	require.Equal(t, AdmitResult{HitTokens: 8, HitBlocks: 2, Tokens: 8}, res)
	s.done(t)
}

// TestManagerAdmitCountsHitBlocksItTakesOffTheEvictableSet is vLLM's
// test_prefill_not_enough_free_blocks_with_computed_blocks: cached blocks a request hits
// cannot also be evicted to make room for the rest of its prompt.
func TestManagerAdmitCountsHitBlocksItTakesOffTheEvictableSet(t *testing.T) {
	s := newStack(t, 10, 4, Config{})
	shared := seqOf(16, 1)
	_, err := s.m.Admit(1, &Request{Prompt: shared})
	require.NoError(t, err)
	require.NoError(t, s.m.Finish(1))
	_, err = s.m.Admit(3, &Request{Prompt: seqOf(4, 900)}) // takes a free block
	require.NoError(t, err)
	// 5 free + 4 cached evictable: 9 available, but the 4 cached are the hit.
	require.Equal(t, 9, s.pool.Available())
	long := append(slices.Clone(shared), seqOf(24, 500)...) // 40 tokens, 10 blocks
	before := s.state(t)
	_, err = s.m.CanAdmit(2, &Request{Prompt: long})
	var oob *blocks.OutOfBlocksError
	require.ErrorAs(t, err, &oob)
	res, err := s.m.Admit(2, &Request{Prompt: long})
	require.ErrorIs(t, err, blocks.ErrOutOfBlocks)
	require.ErrorAs(t, err, &oob)
	require.Equal(t, AdmitResult{}, res)
	require.Equal(t, 6, oob.Requested)
	require.Equal(t, 5, oob.Available)
	require.Equal(t, 1, oob.Missing())
	after := s.state(t)
	require.Equal(t, uint64(1), after.Stats.RejectedAdmissions)
	after.Stats.RejectedAdmissions = 0
	require.Equal(t, before, after, "a refused admission changes nothing")
	require.Equal(t, 9, s.pool.Available())

	// One block shorter fits exactly: the hit plus every other block.
	res, err = s.m.Admit(2, &Request{Prompt: long[:36]})
	require.NoError(t, err)
	require.Equal(t, AdmitResult{HitTokens: 16, HitBlocks: 4, NewBlocks: 5, Tokens: 36}, res)
	require.Zero(t, s.pool.Available())
	s.done(t)
}

func TestManagerCommitsBlocksAsTheyFill(t *testing.T) {
	s := newStack(t, 16, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(6, 1)})
	require.NoError(t, err)
	info, _ := s.m.Seq(1)
	require.Equal(t, 1, info.Committed)
	res, err := s.m.Append(1, []int32{7}, 0)
	require.NoError(t, err)
	require.Zero(t, res.Committed)
	res, err = s.m.Append(1, []int32{8}, 0)
	require.NoError(t, err)
	require.Equal(t, 1, res.Committed, "the second block filled")
	// A concurrent request hits the block that just filled.
	hit, err := s.m.Admit(2, &Request{Prompt: seqOf(9, 1)})
	require.NoError(t, err)
	require.Equal(t, 8, hit.HitTokens)
	s.done(t)
}

func TestManagerForkCopyOnWrite(t *testing.T) {
	s := newStack(t, 16, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(6, 1)})
	require.NoError(t, err)
	require.NoError(t, s.m.Fork(1, 2))
	require.Equal(t, s.m.seqs[1].t.ids, s.m.seqs[2].t.ids)
	parentRow := slices.Clone(s.m.seqs[1].t.ids)

	res, err := s.m.Append(2, []int32{50}, 0)
	require.NoError(t, err)
	require.True(t, res.Copied)
	require.Equal(t, parentRow[1], res.Copy.Src)
	require.NotEqual(t, parentRow[1], res.Copy.Dst)
	row2, _ := s.m.Blocks(2)
	require.Equal(t, res.Copy.Dst, row2[1])
	require.Equal(t, parentRow[0], row2[0], "full blocks stay shared")
	res, err = s.m.Append(1, []int32{7}, 0)
	require.NoError(t, err)
	require.False(t, res.Copied, "the parent owns its block again")
	require.Equal(t, uint64(1), s.m.Stats().CopyOnWrites)
	require.Equal(t, uint64(1), s.m.Stats().Forks)

	// Both fill their second block with different tokens: both commit, nobody's KV mixes.
	_, err = s.m.Append(1, []int32{8}, 0)
	require.NoError(t, err)
	_, err = s.m.Append(2, []int32{51}, 0)
	require.NoError(t, err)
	hit, err := s.m.Admit(3, &Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 50, 51, 0}})
	require.NoError(t, err)
	require.Equal(t, 8, hit.HitTokens)
	require.Equal(t, row2[:2], s.m.seqs[3].t.ids[:2])
	s.done(t)
}

func TestManagerForkErrors(t *testing.T) {
	s := newStack(t, 8, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(3, 1)})
	require.NoError(t, err)
	before := s.state(t)
	require.ErrorIs(t, s.m.Fork(9, 2), ErrUnknownSeq)
	require.ErrorIs(t, s.m.Fork(1, 1), ErrDuplicateSeq)
	require.Equal(t, before, s.state(t))
	s.done(t)
}

func TestManagerTruncateAfterSpeculation(t *testing.T) {
	s := newStack(t, 16, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(5, 1), Lookahead: 3})
	require.NoError(t, err)
	info, _ := s.m.Seq(1)
	require.Equal(t, 3, info.Reserved)
	// Draft tokens 6, 7, 8 land in reserved slots; the block fills and is committed.
	res, err := s.m.Append(1, []int32{6, 7, 8}, 0)
	require.NoError(t, err)
	require.Zero(t, res.NewBlocks)
	require.Equal(t, 1, res.Committed)
	// The verifier rejects the last two: the committed block is now partly used.
	require.NoError(t, s.m.Truncate(1, 6))
	info, _ = s.m.Seq(1)
	require.Equal(t, 6, info.Tokens)
	require.Equal(t, 1, info.Committed, "the cursor moved back")
	cached := s.m.seqs[1].t.ids[1]
	require.True(t, s.idx.IsCached(cached))
	// Writing the corrected token copies the cached block: the cache keeps 7, 8.
	res, err = s.m.Append(1, []int32{70}, 0)
	require.NoError(t, err)
	require.True(t, res.Copied)
	require.Equal(t, cached, res.Copy.Src)
	_, err = s.m.Append(1, []int32{80}, 0)
	require.NoError(t, err)
	for _, tail := range [][]int32{{7, 8}, {70, 80}} {
		p := append(seqOf(6, 1), tail...)
		hit, err := s.m.CanAdmit(2, &Request{Prompt: append(p, 0)})
		require.NoError(t, err)
		require.Equal(t, 8, hit.HitTokens, "both versions of the block are cached")
	}
	require.ErrorIs(t, s.m.Truncate(1, 9), ErrInvalidArgument)
	s.done(t)
}

func TestManagerSlidingWindow(t *testing.T) {
	pool := newPool(t, 7)
	m, err := New(Config{Pool: pool, BlockSize: 4, SlidingWindow: 8})
	require.NoError(t, err)
	s := &stack{m: m, pool: pool}
	_, err = s.m.Admit(1, &Request{Prompt: seqOf(10, 1)})
	require.NoError(t, err)
	for i := range 100 {
		_, err := s.m.Append(1, []int32{int32(i)}, 0)
		require.NoError(t, err, "step %d: the window keeps memory bounded", i)
	}
	st := s.m.Stats()
	require.Zero(t, st.Cached, "sliding-window sequences do not commit")
	require.LessOrEqual(t, st.InUse, 4)
	row := make([]int32, 28)
	n, err := s.m.FillRow(1, row)
	require.NoError(t, err)
	require.Equal(t, 28, n)
	require.Equal(t, int32(0), row[0])
	require.NotEqual(t, int32(0), row[27])
	// A second request with the same prompt hits nothing: there is no index.
	res, err := s.m.Admit(2, &Request{Prompt: seqOf(10, 1)})
	require.NoError(t, err)
	require.Zero(t, res.HitTokens)
	require.NoError(t, s.m.CheckInvariants())
	require.NoError(t, s.m.Finish(1))
	require.NoError(t, s.m.Finish(2))
	requireNoLeak(t, pool)
}

// A sliding window with a prefix index is refused with a typed error that routes the
// caller to blocktable/hybrid, rather than admitted to cache nothing silently; there, one
// SlidingWindow group gets the hit vLLM's SlidingWindowManager would.
func TestManagerSlidingWindowWithIndexRefused(t *testing.T) {
	pool := newPool(t, 7)
	idx, err := prefix.New(pool, 4)
	require.NoError(t, err)
	_, err = New(Config{Pool: pool, Index: idx, SlidingWindow: 8})
	require.ErrorIs(t, err, ErrWindowWithIndex)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, err, blocks.ErrInvalidArgument)
	require.Contains(t, err.Error(), "blocktable/hybrid")
}

func TestManagerPreemptAndReadmit(t *testing.T) {
	s := newStack(t, 8, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(12, 1)})
	require.NoError(t, err)
	_, err = s.m.Admit(2, &Request{Prompt: seqOf(8, 100)})
	require.NoError(t, err)
	_, err = s.m.Append(1, seqOf(4, 13), 0) // 6 blocks used, 16 tokens in seq 1
	require.NoError(t, err)
	_, err = s.m.Admit(3, &Request{Prompt: seqOf(3, 200)}) // the 8th
	require.NoError(t, err)
	_, err = s.m.Append(3, seqOf(2, 203), 0)
	require.NoError(t, err)
	// Sequence 1 cannot grow: every block is held.
	before := s.state(t)
	_, err = s.m.Append(1, []int32{17}, 0)
	var oob *blocks.OutOfBlocksError
	require.ErrorAs(t, err, &oob)
	var se *SeqError
	require.ErrorAs(t, err, &se)
	require.Equal(t, SeqID(1), se.Seq)
	require.Equal(t, 1, oob.Missing())
	require.Equal(t, before, s.state(t))

	// FCFS preempts the newest arrival (3) first.
	out, err := s.m.Preempt(PreemptRequest{Need: oob.Missing(), Protect: []SeqID{1}}, nil)
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, Preempted{Seq: 3, Mode: Recompute, Tokens: 5, Freed: 2}, out[0])
	require.False(t, s.m.Contains(3))
	_, err = s.m.Append(3, []int32{1}, 0)
	require.ErrorIs(t, err, ErrUnknownSeq)
	_, err = s.m.Append(1, []int32{17}, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(1), s.m.Stats().Preemptions)

	// Nothing can free 100 blocks: nothing is preempted.
	before = s.state(t)
	_, err = s.m.Preempt(PreemptRequest{Need: 100}, nil)
	require.ErrorIs(t, err, blocks.ErrOutOfBlocks)
	require.Equal(t, before, s.state(t))

	// Sequence 2 finishes; the victim comes back and re-hits its own committed block.
	require.NoError(t, s.m.Finish(2))
	res, err := s.m.Admit(3, &Request{Prompt: []int32{200, 201, 202, 203, 204}})
	require.NoError(t, err)
	require.Equal(t, 4, res.HitTokens)
	s.done(t)
}

func TestManagerPreemptionPolicy(t *testing.T) {
	s := newStack(t, 8, 4, Config{Preemption: evict.NewPriorityPreemption()})
	for i, prio := range []int{0, 5, 1} {
		_, err := s.m.Admit(SeqID(i+1), &Request{Prompt: seqOf(8, int32(100*i)), Priority: prio})
		require.NoError(t, err)
	}
	out, err := s.m.Preempt(PreemptRequest{Need: 1}, nil)
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, SeqID(2), out[0].Seq, "the least important (largest priority value) goes")
	s.done(t)
}

// Swap keeps the victim in the tiers: its full blocks are held there (HostInUse), the
// partial one is freed at once, the committed one awaits its copy, and Resume loads the
// held block back; Abort of a swapped sequence releases its hold.
func TestManagerSwapOutAndIn(t *testing.T) {
	s := newTieredStack(t, 8, 4, 8, 0)
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(6, 1)})
	require.NoError(t, err)
	p, err := s.m.PreemptSeq(1, Swap)
	require.NoError(t, err)
	require.Equal(t, Swap, p.Mode)
	require.Equal(t, 1, p.Freed, "the partial block is free at once")
	require.Equal(t, 1, p.Awaiting, "the committed block frees once its copy is done")
	info, err := s.m.Seq(1)
	require.NoError(t, err)
	require.Equal(t, Swapped, info.State)
	require.Equal(t, 1, s.m.Stats().Swapped)
	require.Equal(t, 1, s.m.Stats().HostInUse)
	_, err = s.m.Append(1, []int32{7}, 0)
	require.ErrorIs(t, err, ErrNotRunning)
	require.ErrorIs(t, s.m.Fork(1, 2), ErrNotRunning)
	_, err = s.m.Resume(2)
	require.ErrorIs(t, err, ErrUnknownSeq)
	before := s.pool.Available()
	s.completeAll(t, true)
	require.Equal(t, before+p.Awaiting, s.pool.Available(), "Awaiting became available")

	res, err := s.m.Resume(1)
	require.NoError(t, err)
	require.Equal(t, 4, res.LoadTokens, "the held block is loaded")
	require.Zero(t, s.m.Stats().HostInUse, "the hold ends at Resume")
	_, err = s.m.Resume(1)
	require.ErrorIs(t, err, ErrNotRunning)
	s.completeAll(t, true)
	toks, _ := s.m.Tokens(1)
	require.Equal(t, seqOf(6, 1), toks)
	_, err = s.m.Append(1, []int32{7, 8, 9}, 0)
	require.NoError(t, err)

	// Swap by policy; then abort while swapped releases the hold.
	out, err := s.m.Preempt(PreemptRequest{Need: 1, Mode: Swap}, nil)
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, 2, s.m.Stats().HostInUse)
	require.NoError(t, s.m.Abort(1))
	require.Zero(t, s.m.Stats().HostInUse)
	s.done(t)
}

// Swap needs lower tiers: without them it is refused with ErrSwapNeedsTiers (which the
// former name ErrNoHostPool still matches), changing nothing.
func TestManagerSwapNeedsTiers(t *testing.T) {
	s := newStack(t, 8, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(6, 1)})
	require.NoError(t, err)
	before := s.state(t)
	_, err = s.m.PreemptSeq(1, Swap)
	require.ErrorIs(t, err, ErrSwapNeedsTiers)
	require.ErrorIs(t, err, ErrNoHostPool)
	_, err = s.m.Preempt(PreemptRequest{Need: 1, Mode: Swap}, nil)
	require.ErrorIs(t, err, ErrSwapNeedsTiers)
	require.Equal(t, before, s.state(t))
	s.done(t)
}

func TestManagerWatermark(t *testing.T) {
	s := newStack(t, 10, 4, Config{Watermark: 0.2})        // keeps 2 blocks
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(32, 1)}) // 8 blocks + 2 = 10
	require.NoError(t, err)
	_, err = s.m.Admit(2, &Request{Prompt: []int32{1000}})
	var oob *blocks.OutOfBlocksError
	require.ErrorAs(t, err, &oob)
	require.Equal(t, 3, oob.Requested)
	// Running sequences may still grow into the watermark.
	_, err = s.m.Append(1, []int32{5}, 0)
	require.NoError(t, err)
	s.done(t)
}

func TestManagerTypedErrorsChangeNothing(t *testing.T) {
	s := newStack(t, 8, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(5, 1)})
	require.NoError(t, err)
	require.NoError(t, s.m.Finish(1))
	_, err = s.m.Admit(2, &Request{Prompt: seqOf(5, 1)})
	require.NoError(t, err)
	before := s.state(t)
	calls := []struct {
		name string
		call func() error
		want error
	}{
		{"admit duplicate", func() error { _, err := s.m.Admit(2, &Request{Prompt: []int32{1}}); return err }, ErrDuplicateSeq},
		{"admit empty", func() error { _, err := s.m.Admit(3, &Request{}); return err }, ErrInvalidArgument},
		{"admit nil", func() error { _, err := s.m.Admit(3, nil); return err }, ErrInvalidArgument},
		{"admit negative lookahead", func() error {
			_, err := s.m.Admit(3, &Request{Prompt: []int32{1}, Lookahead: -1})
			return err
		}, ErrInvalidArgument},
		{"can admit duplicate", func() error { _, err := s.m.CanAdmit(2, &Request{Prompt: []int32{1}}); return err }, ErrDuplicateSeq},
		{"append to finished", func() error { _, err := s.m.Append(1, []int32{1}, 0); return err }, ErrUnknownSeq},
		{"append negative lookahead", func() error { _, err := s.m.Append(2, []int32{1}, -1); return err }, ErrInvalidArgument},
		{"finish unknown", func() error { return s.m.Finish(9) }, ErrUnknownSeq},
		{"finish twice", func() error { return s.m.Finish(1) }, ErrUnknownSeq},
		{"abort unknown", func() error { return s.m.Abort(9) }, ErrUnknownSeq},
		{"fork missing", func() error { return s.m.Fork(9, 3) }, ErrUnknownSeq},
		{"fork onto existing", func() error { return s.m.Fork(2, 2) }, ErrDuplicateSeq},
		{"truncate unknown", func() error { return s.m.Truncate(9, 0) }, ErrUnknownSeq},
		{"truncate longer", func() error { return s.m.Truncate(2, 6) }, ErrInvalidArgument},
		{"truncate negative", func() error { return s.m.Truncate(2, -1) }, ErrInvalidArgument},
		{"preempt unknown", func() error { _, err := s.m.PreemptSeq(9, Recompute); return err }, ErrUnknownSeq},
		{"preempt bad mode", func() error { _, err := s.m.PreemptSeq(2, 7); return err }, ErrInvalidArgument},
		{"preempt negative", func() error { _, err := s.m.Preempt(PreemptRequest{Need: -1}, nil); return err }, ErrInvalidArgument},
		{"resume running", func() error { _, err := s.m.Resume(2); return err }, ErrNotRunning},
		{"slot outside", func() error { _, err := s.m.Slot(2, 8); return err }, ErrInvalidArgument},
		{"slot unknown", func() error { _, err := s.m.Slot(9, 0); return err }, ErrUnknownSeq},
		{"fill slots outside", func() error { _, err := s.m.FillSlots(2, 9, 0, make([]int64, 2)); return err }, ErrInvalidArgument},
		{"fill row short", func() error { _, err := s.m.FillRow(2, make([]int32, 1)); return err }, ErrShortBuffer},
		{"pack unknown", func() error { return s.m.Pack(&Batch{}, []SeqID{2, 9}) }, ErrUnknownSeq},
		{"seq unknown", func() error { _, err := s.m.Seq(9); return err }, ErrUnknownSeq},
		{"tokens unknown", func() error { _, err := s.m.Tokens(9); return err }, ErrUnknownSeq},
		{"inputs unknown", func() error { _, err := s.m.AppendInputs(nil, 9); return err }, ErrUnknownSeq},
		{"append tokens unknown", func() error { _, err := s.m.AppendTokens(nil, 9); return err }, ErrUnknownSeq},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			require.ErrorIs(t, err, c.want)
			require.NotEmpty(t, err.Error())
			require.Equal(t, before, s.state(t), "state changed")
		})
	}
	s.done(t)
}

func TestManagerSlotsRowsAndPack(t *testing.T) {
	s := newStack(t, 16, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(6, 1)})
	require.NoError(t, err)
	_, err = s.m.Admit(2, &Request{Prompt: seqOf(2, 50), Lookahead: 3})
	require.NoError(t, err)
	r1, _ := s.m.Blocks(1)
	r2, _ := s.m.Blocks(2)
	require.Equal(t, []blocks.ID{1, 2}, r1)
	require.Equal(t, []blocks.ID{3, 4}, r2)
	slot, err := s.m.Slot(1, 5)
	require.NoError(t, err)
	require.Equal(t, int64(2*4+1), slot)
	slots := make([]int64, 6)
	n, err := s.m.FillSlots(2, 0, 0, slots)
	require.NoError(t, err)
	require.Equal(t, 2, n, "only positions that hold tokens, not the block's empty tail")
	require.Equal(t, []int64{12, 13, -1, -1, -1, -1}, slots)
	n, err = s.m.FillSlots(2, 1, 3, slots)
	require.NoError(t, err)
	require.Equal(t, 4, n, "the last token, then the 3 lookahead slots asked for")
	require.Equal(t, []int64{13, 14, 15, 16, -1, -1}, slots)
	_, err = s.m.FillSlots(2, 0, 4, slots)
	require.ErrorIs(t, err, ErrInvalidArgument, "more lookahead than reserved")
	_, err = s.m.FillSlots(2, 0, 3, slots[:4])
	require.ErrorIs(t, err, ErrShortBuffer)
	_, err = s.m.FillSlots(2, 3, 0, slots)
	require.ErrorIs(t, err, ErrInvalidArgument, "a position past the tokens")

	var b Batch
	require.NoError(t, s.m.Pack(&b, []SeqID{2, 1}))
	require.Equal(t, []int32{3, 4, 1, 2}, b.Rows())
	b.MaxBlocks = 3
	require.NoError(t, s.m.Pack(&b, []SeqID{1}))
	require.Equal(t, []int32{1, 2, 0}, b.Rows())
	require.ErrorIs(t, s.m.Pack(&b, []SeqID{1, 9}), ErrUnknownSeq)
	require.Equal(t, []int32{1, 2, 0}, b.Rows(), "unchanged on error")
	if !invariant.Enabled {
		seqs := []SeqID{2, 1}
		allocs := testing.AllocsPerRun(100, func() { _ = s.m.Pack(&b, seqs) })
		require.Zero(t, allocs, "packing reuses the batch's memory")
	}
	require.Equal(t, []SeqID{1, 2}, s.m.Seqs(nil))
	s.done(t)
}

func TestNewRejectsBadConfig(t *testing.T) {
	pool := newPool(t, 8)
	noNull, err := blocks.New(8)
	require.NoError(t, err)
	for name, cfg := range map[string]Config{
		"no pool":         {BlockSize: 4},
		"no block size":   {Pool: pool},
		"watermark":       {Pool: pool, BlockSize: 4, Watermark: 1},
		"negative window": {Pool: pool, BlockSize: 4, SlidingWindow: -1},
		"window no null":  {Pool: noNull, BlockSize: 4, SlidingWindow: 8},
	} {
		_, err := New(cfg)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
	}
	m, err := New(Config{Pool: pool, BlockSize: 4})
	require.NoError(t, err)
	require.Equal(t, 4, m.Config().BlockSize)
}

func TestManagerWithoutIndex(t *testing.T) {
	pool := newPool(t, 9)
	m, err := New(Config{Pool: pool, BlockSize: 4})
	require.NoError(t, err)
	_, err = m.Admit(1, &Request{Prompt: seqOf(8, 1)})
	require.NoError(t, err)
	res, err := m.Admit(2, &Request{Prompt: seqOf(8, 1)})
	require.NoError(t, err)
	require.Zero(t, res.HitTokens, "no index, no sharing")
	require.NoError(t, m.Finish(1))
	require.NoError(t, m.Abort(2))
	require.NoError(t, m.CheckInvariants())
	requireNoLeak(t, pool)
}

func TestManagerAppendDoesNotAllocate(t *testing.T) {
	if invariant.Enabled {
		t.Skip("invariant checks allocate")
	}
	s := newStack(t, 512, 16, Config{})
	prompt := seqOf(100, 1)
	req := &Request{Prompt: prompt, MaxTokens: 100 + 1000}
	_, err := s.m.Admit(1, req)
	require.NoError(t, err)
	tok := []int32{7}
	seq := SeqID(1)
	slots := make([]int64, 1)
	row := make([]int32, 128)
	allocs := testing.AllocsPerRun(2000, func() {
		info, _ := s.m.Seq(seq)
		if info.Tokens >= 1000 {
			_ = s.m.Finish(seq)
			seq++
			if _, err := s.m.Admit(seq, req); err != nil {
				panic(err)
			}
			info.Tokens = len(prompt)
		}
		if _, err := s.m.Append(seq, tok, 0); err != nil {
			panic(err)
		}
		if n, err := s.m.FillSlots(seq, info.Tokens, 0, slots); err != nil || n != 1 {
			panic(err)
		}
		_, _ = s.m.FillRow(seq, row)
	})
	require.Zero(t, allocs, "a decode step allocates nothing")
	s.done(t)
}

// Forks share their blocks, so neither frees anything alone (Freeable 0), but preempting
// both does: Preempt must see that rather than refuse.
func TestManagerPreemptSharedForks(t *testing.T) {
	s := newStack(t, 4, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(7, 1)})
	require.NoError(t, err)
	require.NoError(t, s.m.Fork(1, 2))
	_, err = s.m.Admit(3, &Request{Prompt: seqOf(7, 100)})
	require.NoError(t, err)
	require.Zero(t, s.pool.Available())
	for _, id := range []SeqID{1, 2} {
		require.Zero(t, s.m.freeable(s.m.seqs[id]))
	}
	out, err := s.m.Preempt(PreemptRequest{Need: 2, Protect: []SeqID{3}}, nil)
	require.NoError(t, err)
	require.Len(t, out, 2)
	require.Equal(t, SeqID(2), out[0].Seq, "newest first")
	require.Equal(t, 0, out[0].Freed)
	require.Equal(t, 2, out[1].Freed)
	require.Equal(t, 2, s.pool.Available())
	// Asking for more than everything can free preempts nobody.
	_, err = s.m.Preempt(PreemptRequest{Need: 3}, nil)
	require.ErrorIs(t, err, blocks.ErrOutOfBlocks)
	require.True(t, s.m.Contains(3))
	s.done(t)
}

func TestManagerChunkedPrefill(t *testing.T) {
	s := newStack(t, 16, 4, Config{})
	prompt := seqOf(22, 1)
	_, err := s.m.Admit(1, &Request{Prompt: prompt})
	require.NoError(t, err)
	// The same prompt in chunks of 6 tokens past the hit of 20.
	long := append(slices.Clone(prompt), seqOf(14, 50)...) // 36 tokens
	res, err := s.m.Admit(2, &Request{Prompt: long, Prefill: 6})
	require.NoError(t, err)
	require.Equal(t, AdmitResult{HitTokens: 20, HitBlocks: 5, NewBlocks: 2, Tokens: 26}, res)
	_, err = s.m.Append(2, long[26:32], 0)
	require.NoError(t, err)
	_, err = s.m.Append(2, long[32:], 0)
	require.NoError(t, err)
	toks, _ := s.m.Tokens(2)
	require.Equal(t, long, toks)
	info, _ := s.m.Seq(2)
	require.Equal(t, 9, info.Committed)
	s.done(t)
}
