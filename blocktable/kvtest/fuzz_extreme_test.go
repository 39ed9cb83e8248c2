package kvtest_test

import (
	"errors"
	"math"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvtest"
	"github.com/kvpage/kvpage/prefix"
)

// extremes are the integers FuzzManagerExtremes passes as sizes, counts, positions and IDs:
// the edges of int and int32, the pool's capacity in blocks and slots and their
// neighbours, and small values, so that every check against overflow and capacity is
// tried from both sides.
var extremes = []int{
	0, 1, -1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 63, 64, 65,
	math.MaxInt, math.MaxInt - 1, math.MaxInt - 63, math.MaxInt/2 + 1, math.MaxInt / 4,
	math.MinInt, math.MinInt + 1, -64,
	math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MaxUint32, 1 << 40, 1 << 62,
}

// fuzzInts decodes the fuzzer's bytes into a stream of integers: a byte below
// len(extremes) picks an extreme, any other byte is itself a small count.
type fuzzInts struct{ data []byte }

func (f *fuzzInts) next() int {
	if len(f.data) == 0 {
		return 0
	}
	b := int(f.data[0])
	f.data = f.data[1:]
	if b < len(extremes) {
		return extremes[b]
	}
	return b - len(extremes)
}

func (f *fuzzInts) small(n int) int {
	v := f.next() % n
	if v < 0 {
		v += n
	}
	return v
}

// FuzzManagerExtremes drives a Manager (with its pool, index and host pool) with extreme
// integers in every argument that takes a size, count, position or ID. After every call:
// nothing panicked, the invariants of pool, index, tables and Manager hold, and a call that
// failed returned one of the package's typed errors and left the whole-state dump exactly
// as it was (counters aside when it failed for lack of memory, which counts itself). It is
// deterministic and fast, so CI fuzzes it by iteration count.
func FuzzManagerExtremes(f *testing.F) {
	f.Add([]byte{0, 20, 1, 2, 1, 30, 3, 16, 4, 2})
	f.Add([]byte{0, 31, 0, 16, 0, 0, 1, 0, 16, 2, 0, 17, 3, 0, 22})
	f.Add([]byte{0, 40, 5, 0, 0, 3, 0, 1, 6, 0, 0, 9, 0, 16, 10, 0, 25, 24})
	f.Add([]byte{0, 50, 0, 0, 19, 8, 0, 0, 7, 0, 1, 11, 0, 0, 12, 1, 13, 33, 14, 0, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		env := kvtest.New(t, kvtest.Config{Blocks: 17, BlockSize: 4, HostBlocks: 8})
		m := env.Manager
		in := &fuzzInts{data: data}
		snapshot := snapshotOf(env.Dump)
		seq := func() blocktable.SeqID { return blocktable.SeqID(in.small(6)) }
		for ops := 0; len(in.data) > 0 && ops < 64; ops++ {
			kind := in.small(16)
			before, beforeNoCounters := snapshot(true), snapshot(false)
			var err error
			switch kind {
			case 0, 1:
				n := in.small(80) // prompt length: up to past the pool's 64 slots
				prompt := make([]int32, n)
				for i := range prompt {
					prompt[i] = int32(i % 7)
				}
				req := &blocktable.Request{Prompt: prompt, Lookahead: in.next(), Prefill: in.next(), MaxTokens: in.next(), Priority: in.next()}
				if in.small(2) == 0 {
					req.Namespace = prefix.Namespace{Salt: "t"}
				}
				if kind == 0 {
					_, err = m.Admit(seq(), req)
				} else {
					_, err = m.CanAdmit(seq(), req)
				}
			case 2:
				toks := make([]int32, in.small(24))
				_, err = m.Append(seq(), toks, in.next())
			case 3:
				err = m.Truncate(seq(), in.next())
			case 4:
				err = m.Fork(seq(), seq())
			case 5:
				_, err = m.Slot(seq(), in.next())
			case 6:
				_, err = m.FillSlots(seq(), in.next(), in.next(), make([]int64, in.small(80)))
			case 7:
				_, err = m.Preempt(blocktable.PreemptRequest{Need: in.next(), Mode: blocktable.PreemptMode(in.small(3)), Protect: []blocktable.SeqID{seq()}}, nil)
			case 8:
				_, err = m.PreemptSeq(seq(), blocktable.PreemptMode(in.small(3)))
			case 9:
				_, err = m.Resume(seq())
			case 10:
				err = m.Finish(seq())
			case 11:
				err = m.Abort(seq())
			case 12:
				_, err = m.FillRow(seq(), make([]int32, in.small(20)))
			case 13:
				var ids []blocks.ID
				if ids, err = env.Pool.Allocate(nil, in.next()); err == nil {
					err = env.Pool.Release(ids...) // gives back what it took: no leak
				}
			case 14:
				id := blocks.ID(in.next())
				if err = env.Pool.Retain(id); err == nil {
					err = env.Pool.Release(id) // a held block: give the holder back
				}
			case 15:
				_, err = m.Preempt(blocktable.PreemptRequest{Need: in.next()}, nil)
			}
			if cerr := env.Check(); cerr != nil {
				t.Fatalf("op %d (kind %d): invariants: %v\n%s", ops, kind, cerr, env.Dump())
			}
			if err == nil {
				continue
			}
			if !isTyped(err) {
				t.Fatalf("op %d (kind %d): untyped error %v", ops, kind, err)
			}
			if errors.Is(err, blocks.ErrOutOfBlocks) {
				if got := snapshot(false); got != beforeNoCounters {
					t.Fatalf("op %d (kind %d) failed (%v) and changed the state:\nbefore:\n%s\nafter:\n%s", ops, kind, err, beforeNoCounters, got)
				}
			} else if got := snapshot(true); got != before {
				t.Fatalf("op %d (kind %d) failed (%v) and changed the state:\nbefore:\n%s\nafter:\n%s", ops, kind, err, before, got)
			}
		}
		env.AbortAll()
	})
}

// isTyped reports whether err wraps one of the sentinels a caller can test for.
func isTyped(err error) bool {
	for _, s := range []error{
		blocks.ErrOutOfBlocks, blocktable.ErrUnknownSeq, blocktable.ErrDuplicateSeq, blocktable.ErrNotRunning,
		blocktable.ErrShortBuffer, blocktable.ErrNoHostPool, blocktable.ErrInvalidArgument, blocktable.ErrTooLarge,
		blocks.ErrOutOfBlocks, blocks.ErrInvalidArgument, blocks.ErrUnknownBlock, blocks.ErrNotAllocated,
		blocks.ErrNullBlock, blocks.ErrRefCountOverflow, blocks.ErrDoubleFree,
		prefix.ErrTierFull,         // a Swap the host tier cannot hold (Preempt, PreemptSeq)
		blocktable.ErrSwapInFlight, // a Resume while stream-ordered copies are in flight
	} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
