package blocktable

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// callerClock is the default Counter behind a type of the caller's, so that the index
// ticks it through the Clock interface and releases a Manager's table with its general
// pass, not with the default clock's own (prefix's releaseHeldCounted).
type callerClock struct{ c evict.Counter }

func (k *callerClock) Now() uint64  { return k.c.Now() }
func (k *callerClock) Tick() uint64 { return k.c.Tick() }

func newStackClock(t *testing.T, usable, bs int, clock evict.Clock) *stack {
	t.Helper()
	pool := newPool(t, usable+1)
	idx, err := prefix.New(pool, bs, prefix.WithClock(clock))
	require.NoError(t, err)
	m, err := New(Config{Pool: pool, Index: idx, BlockSize: bs, Clock: clock})
	require.NoError(t, err)
	return &stack{m: m, pool: pool, idx: idx}
}

// text is the stack's whole state: the manager's, the index's and the pool's.
func (s *stack) text(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, s.m.WriteState(&b))
	require.NoError(t, s.idx.WriteState(&b))
	require.NoError(t, s.pool.WriteState(&b))
	return b.String()
}

// lockstep drives a and b with the same random schedule of admissions with shared
// prefixes, decode steps (one token at a time, by stepA on a and stepB on b), chunks,
// forks, finishes and aborts on a small pool that evicts and refuses, and requires the
// same results, the same errors and the same whole state after every call.
func lockstep(t *testing.T, seed uint64, a, b *stack, stepA, stepB func(*Manager, SeqID, int32) (AppendResult, error)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 19))
	var live []SeqID
	next := SeqID(1)
	for op := range 600 {
		var ea, eb error
		switch k := rng.IntN(10); {
		case k < 2 || len(live) == 0: // admit: one of three shared prefixes and a tail of its own
			prompt := append(seqOf(4*rng.IntN(6), int32(1000*rng.IntN(3))), seqOf(1+rng.IntN(9), int32(100000+op))...)
			req := Request{Prompt: prompt, MaxTokens: len(prompt) + 40}
			ra, errA := a.m.Admit(next, &req)
			rb, errB := b.m.Admit(next, &req)
			ea, eb = errA, errB
			assert.Equal(t, ra, rb, "op %d admit", op)
			if errA == nil {
				live = append(live, next)
			}
			next++
		case k < 7: // decode steps of one sequence, or of an unknown one
			seq := live[rng.IntN(len(live))]
			if rng.IntN(20) == 0 {
				seq = next + 1000
			}
			for n := 1 + rng.IntN(8); n > 0; n-- {
				tok := int32(rng.IntN(5)) // few values: later prompts hit decoded blocks
				ra, errA := stepA(a.m, seq, tok)
				rb, errB := stepB(b.m, seq, tok)
				ea, eb = errA, errB
				require.Equal(t, ra, rb, "op %d step of seq %d", op, seq)
				if errA != nil {
					break
				}
			}
		case k < 8: // a chunk, through Append on both
			seq := live[rng.IntN(len(live))]
			chunk := seqOf(1+rng.IntN(6), int32(rng.IntN(3)))
			ra, errA := a.m.Append(seq, chunk, 0)
			rb, errB := b.m.Append(seq, chunk, 0)
			ea, eb = errA, errB
			assert.Equal(t, ra, rb, "op %d chunk", op)
		case k < 9: // fork: shared blocks, so a release leaves some held
			parent := live[rng.IntN(len(live))]
			ea, eb = a.m.Fork(parent, next), b.m.Fork(parent, next)
			if ea == nil {
				live = append(live, next)
			}
			next++
		default: // finish or abort
			i := rng.IntN(len(live))
			if rng.IntN(2) == 0 {
				ea, eb = a.m.Finish(live[i]), b.m.Finish(live[i])
			} else {
				ea, eb = a.m.Abort(live[i]), b.m.Abort(live[i])
			}
			if ea == nil {
				live = append(live[:i], live[i+1:]...)
			}
		}
		require.Equal(t, ea, eb, "op %d", op)
		require.Equal(t, a.text(t), b.text(t), "op %d", op)
	}
	require.NoError(t, a.m.CheckInvariants())
	require.NoError(t, b.m.CheckInvariants())
	for _, seq := range live {
		require.NoError(t, a.m.Finish(seq))
		require.NoError(t, b.m.Finish(seq))
	}
	require.Equal(t, a.text(t), b.text(t))
}

func appendOne(m *Manager, seq SeqID, tok int32) (AppendResult, error) {
	return m.Append(seq, []int32{tok}, 0)
}

func appendToken(m *Manager, seq SeqID, tok int32) (AppendResult, error) {
	return m.AppendToken(seq, tok)
}

// AppendToken is Append of one token: the same results, errors and state, call by call,
// through the decode step's short path and every slow one (a new block, a commit, a
// copy-on-write after a fork, out of blocks with eviction, an unknown sequence).
func TestAppendTokenMatchesAppend(t *testing.T) {
	for seed := range uint64(6) {
		a := newStackClock(t, 24, 4, &evict.Counter{})
		b := newStackClock(t, 24, 4, &evict.Counter{})
		lockstep(t, seed, a, b, appendToken, appendOne)
	}
}

// The index releases a Manager's table with its own pass when its clock is the default
// Counter (ticking in line) and with the general one otherwise: both leave the same
// stamps, pins, holders and eviction order.
func TestReleaseWithDefaultClockMatchesCallerClock(t *testing.T) {
	for seed := range uint64(6) {
		a := newStackClock(t, 24, 4, &evict.Counter{})
		b := newStackClock(t, 24, 4, &callerClock{})
		lockstep(t, seed, a, b, appendToken, appendToken)
	}
}

// AppendToken's refusals are Append's, typed, and change nothing.
func TestAppendTokenRefusesLikeAppend(t *testing.T) {
	s := newStack(t, 3, 4, Config{})
	_, err := s.m.Admit(2, &Request{Prompt: seqOf(4, 50)}) // holds the third block
	require.NoError(t, err)
	_, err = s.m.Admit(1, &Request{Prompt: seqOf(7, 1)})
	require.NoError(t, err)
	before := s.text(t)
	_, err = s.m.AppendToken(9, 1)
	require.ErrorIs(t, err, ErrUnknownSeq)
	var se *SeqError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, SeqID(9), se.Seq)
	require.Equal(t, before, s.text(t))

	res, err := s.m.AppendToken(1, 8) // the 8th token fills the second block
	require.NoError(t, err)
	assert.Equal(t, 1, res.Committed)
	before = s.text(t)
	_, err = s.m.AppendToken(1, 9) // a third block: seq 2 holds the last one
	require.ErrorIs(t, err, blocks.ErrOutOfBlocks)
	require.ErrorAs(t, err, &se)
	assert.Equal(t, SeqID(1), se.Seq)
	require.Equal(t, before, s.text(t), "a refused step changes nothing")
	s.done(t)
}

// A decode step that allocates a block leaves the rest of it as room, so that the next
// steps take the short path (Table.setRoom); without it every first step after a new
// block would check the table again.
func TestTableAppendLeavesRoomInANewBlock(t *testing.T) {
	pool, err := blocks.New(8)
	require.NoError(t, err)
	tb, err := NewTable(pool, 4)
	require.NoError(t, err)
	res, err := tb.Append(4, 0)
	require.NoError(t, err)
	require.Equal(t, 1, res.NewBlocks)
	assert.Zero(t, tb.room, "the block is full")
	res, err = tb.Append(1, 0)
	require.NoError(t, err)
	require.Equal(t, 1, res.NewBlocks)
	assert.Equal(t, 3, tb.room, "the new block's other three slots")
	res, err = tb.Append(1, 3) // lookahead: the reserved slots are not room
	require.NoError(t, err)
	assert.Zero(t, tb.room)
	require.Equal(t, 1, res.NewBlocks)
	require.NoError(t, tb.CheckInvariants())
	require.NoError(t, tb.Release())
}

// CheckInvariants catches a table with room whose sequence has a full block uncommitted:
// the decode step's short path commits only a block it fills, so such a block would stay
// out of the index.
func TestCheckInvariantsCatchesRoomBeforeACommit(t *testing.T) {
	s := newStack(t, 8, 4, Config{})
	_, err := s.m.Admit(1, &Request{Prompt: seqOf(5, 1)})
	require.NoError(t, err)
	_, err = s.m.AppendToken(1, 6)
	require.NoError(t, err)
	sq := s.m.seqs[1]
	require.Positive(t, sq.t.room)
	require.Equal(t, 1, sq.committed())
	require.NoError(t, s.m.CheckInvariants())
	cur := sq.cur
	sq.cur = prefix.Cursor{} // as if the full block had never been committed
	err = s.m.CheckInvariants()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "room in its last block")
	sq.cur = cur
	s.done(t)
}

func TestAppendTokenDoesNotAllocate(t *testing.T) {
	if invariant.Enabled {
		t.Skip("invariant checks allocate")
	}
	s := newStack(t, 512, 16, Config{})
	prompt := seqOf(100, 1)
	req := &Request{Prompt: prompt, MaxTokens: 100 + 1000}
	_, err := s.m.Admit(1, req)
	require.NoError(t, err)
	seq := SeqID(1)
	n := len(prompt)
	allocs := testing.AllocsPerRun(2000, func() {
		if n >= 1000 {
			_ = s.m.Finish(seq)
			seq++
			if _, err := s.m.Admit(seq, req); err != nil {
				panic(err)
			}
			n = len(prompt)
		}
		if _, err := s.m.AppendToken(seq, 7); err != nil && !errors.Is(err, blocks.ErrOutOfBlocks) {
			panic(err)
		}
		n++
	})
	require.Zero(t, allocs, "a decode step allocates nothing")
	s.done(t)
}

// appendInNew is Append(1, 0) when the table's blocks are all full: the same block, the
// same result and state, room for the rest of the new block; it refuses (changing
// nothing) a partly filled last block, a window, and an empty pool, whose answers are
// Append's.
func TestAppendInNewIsAppendOfOneToken(t *testing.T) {
	twin := func(opts ...TableOption) (*Table, *Table) {
		pa, err := blocks.New(4, blocks.WithNullBlock())
		require.NoError(t, err)
		pb, err := blocks.New(4, blocks.WithNullBlock())
		require.NoError(t, err)
		a, err := NewTable(pa, 4, opts...)
		require.NoError(t, err)
		b, err := NewTable(pb, 4, opts...)
		require.NoError(t, err)
		return a, b
	}
	a, b := twin()
	for range 2 { // an empty table, then one whose block is full
		ra, ok := a.appendInNew()
		require.True(t, ok)
		rb, err := b.Append(1, 0)
		require.NoError(t, err)
		assert.Equal(t, rb, ra)
		assert.Equal(t, b.ids, a.ids)
		assert.Equal(t, b.tokens, a.tokens)
		assert.Equal(t, 3, a.room)
		assert.Equal(t, b.room, a.room)
		require.NoError(t, a.CheckInvariants())
		_, ok = a.appendInNew()
		assert.False(t, ok, "the last block has room")
		for range 3 {
			_, err = a.Append(1, 0)
			require.NoError(t, err)
			_, err = b.Append(1, 0)
			require.NoError(t, err)
		}
	}
	other, err := a.pool.Allocate(nil, 1) // the pool's last block, held elsewhere
	require.NoError(t, err)
	before := a.tokens
	_, ok := a.appendInNew()
	assert.False(t, ok, "no block left in the pool")
	assert.Equal(t, before, a.tokens)
	_, err = a.Append(1, 0)
	require.ErrorIs(t, err, blocks.ErrOutOfBlocks)
	require.NoError(t, a.pool.Release(other...))
	_, err = a.Append(4, 0) // the table holds the whole pool
	require.NoError(t, err)
	_, ok = a.appendInNew()
	assert.False(t, ok, "no slot left in the pool's capacity")
	_, err = a.Append(1, 0)
	require.ErrorIs(t, err, ErrTooLarge)
	require.NoError(t, a.CheckInvariants())

	w, _ := twin(WithWindow(8))
	_, ok = w.appendInNew()
	assert.False(t, ok, "a window takes Append's path")
	assert.Zero(t, w.Len())
}
