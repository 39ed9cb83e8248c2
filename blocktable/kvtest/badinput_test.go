package kvtest_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvtest"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// badCase is one invalid call: it must return an error matching want (errors.Is) and leave
// the deep snapshot exactly as it was. A refusal for lack of memory may count itself in a
// counter (failed allocations, rejected admissions, lookups), so for those the snapshot is
// compared without its counter lines.
type badCase struct {
	method   string // Type.Method, for the coverage check
	name     string
	call     func() error
	want     []error
	counters bool // counters may change
}

// badStack is a stack with something in every state: running sequences sharing blocks
// after a fork, a swapped sequence, cached evictable blocks, a free block, a host tier
// with room for one more block.
func badStack(t *testing.T) *kvtest.Env {
	env := kvtest.New(t, kvtest.Config{Blocks: 17, BlockSize: 4, HostBlocks: 2})
	m := env.Manager
	admit := func(name, prompt string, look int) {
		_, err := m.Admit(env.Seq(name), &blocktable.Request{Prompt: kvtest.MustTokens(prompt), Lookahead: look})
		require.NoError(t, err)
	}
	admit("a", "0..9", 0)
	require.NoError(t, m.Fork(env.Seq("a"), env.Seq("b")))
	admit("c", "100..105", 0)
	_, err := m.PreemptSeq(env.Seq("c"), blocktable.Swap)
	require.NoError(t, err)
	admit("d", "200..215", 0)
	require.NoError(t, m.Finish(env.Seq("d")))
	admit("e", "300..309", 3)
	require.NoError(t, env.Check())
	t.Cleanup(env.AbortAll) // runs before the leak check New registered
	return env
}

// snapshotOf returns the deep snapshot function of an Env: its whole-state dump,
// optionally without counter lines.
func snapshotOf(dump func() string) func(counters bool) string {
	return func(counters bool) string {
		s := dump()
		if counters {
			return s
		}
		lines := strings.Split(s, "\n")
		out := lines[:0]
		for _, l := range lines {
			if !strings.Contains(l, "counters ") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
}

func runBadCases(t *testing.T, snapshot func(counters bool) string, cases []badCase, check func() error) {
	t.Helper()
	for _, c := range cases {
		before := snapshot(!c.counters)
		err := c.call()
		require.Error(t, err, "%s: %s", c.method, c.name)
		for _, w := range c.want {
			require.ErrorIs(t, err, w, "%s: %s", c.method, c.name)
		}
		require.Equal(t, before, snapshot(!c.counters), "%s: %s changed the state", c.method, c.name)
		if check != nil {
			require.NoError(t, check(), "%s: %s", c.method, c.name)
		}
	}
}

func freeBlock(t *testing.T, p *blocks.Pool) blocks.ID {
	for i := 1; i < p.NumBlocks(); i++ {
		if p.RefCount(blocks.ID(i)) == 0 {
			return blocks.ID(i)
		}
	}
	t.Fatal("no free block")
	return 0
}

func evictableBlock(t *testing.T, env *kvtest.Env) blocks.ID {
	for i := 1; i < env.Pool.NumBlocks(); i++ {
		b := blocks.ID(i)
		if env.Index.IsCached(b) && env.Pool.RefCount(b) == 1 {
			return b
		}
	}
	t.Fatal("no evictable block")
	return 0
}

// TestBadInputChangesNothing calls every exported mutating method of Pool, Index, Table
// and Manager with each kind of invalid argument: each returns a typed error and leaves a
// deep snapshot (the whole-state dump) unchanged. TestBadInputCoversEveryMethod checks
// that the table keeps up with the API.
func TestBadInputChangesNothing(t *testing.T) {
	for _, group := range badGroups(t) {
		t.Run(group.name, func(t *testing.T) {
			runBadCases(t, group.snapshot, group.cases, group.check)
		})
	}
}

type badGroup struct {
	name     string
	snapshot func(counters bool) string
	cases    []badCase
	check    func() error
}

func badGroups(t *testing.T) []badGroup {
	return []badGroup{poolCases(t), indexCases(t), requiredNSCases(t), tableCases(t), managerCases(t), noHostCases(t), constructorCases()}
}

func errs(e ...error) []error { return e }

func poolCases(t *testing.T) badGroup {
	env := badStack(t)
	p := env.Pool
	free := freeBlock(t, p)
	held := env.Seq("e")
	tbl, _ := env.Manager.Blocks(held)
	last := tbl[len(tbl)-1] // one holder: e's lookahead block
	n := blocks.ID(p.NumBlocks())
	return badGroup{name: "Pool", snapshot: snapshotOf(env.Dump), check: env.Check, cases: []badCase{
		{"Pool.Allocate", "a negative count", func() error { _, err := p.Allocate(nil, -1); return err }, errs(blocks.ErrInvalidArgument), false},
		{"Pool.Allocate", "more than free and reclaimable", func() error { _, err := p.Allocate(nil, p.Capacity()+1); return err }, errs(blocks.ErrOutOfBlocks), true},
		{"Pool.Retain", "a free block", func() error { return p.Retain(free) }, errs(blocks.ErrNotAllocated), false},
		{"Pool.Retain", "a held block, then a free one", func() error { return p.Retain(last, free) }, errs(blocks.ErrNotAllocated), false},
		{"Pool.Retain", "an unknown block", func() error { return p.Retain(n) }, errs(blocks.ErrUnknownBlock), false},
		{"Pool.Retain", "a negative block", func() error { return p.Retain(-1) }, errs(blocks.ErrUnknownBlock), false},
		{"Pool.Retain", "the null block", func() error { return p.Retain(blocks.NullID) }, errs(blocks.ErrNullBlock), false},
		{"Pool.Release", "a free block (double free)", func() error { return p.Release(free) }, errs(blocks.ErrDoubleFree), false},
		{"Pool.Release", "a block more times than it is held", func() error { return p.Release(last, last) }, errs(blocks.ErrDoubleFree), false},
		{"Pool.Release", "an unknown block", func() error { return p.Release(last, n+5) }, errs(blocks.ErrUnknownBlock), false},
		{"Pool.Release", "the null block", func() error { return p.Release(blocks.NullID) }, errs(blocks.ErrNullBlock), false},
	}}
}

func indexCases(t *testing.T) badGroup {
	env := badStack(t)
	x := env.Index
	free := freeBlock(t, env.Pool)
	evictable := evictableBlock(t, env)
	aTbl, _ := env.Manager.Blocks(env.Seq("a"))
	cachedHeld, partial := aTbl[1], aTbl[2]                                                           // a holds block 2 cached, block 3 uncached
	_, root := x.Peek(nil, &prefix.Prompt{Tokens: kvtest.MustTokens("900..903")}, prefix.WholePrompt) // at the default root
	prompt := func(spec string) *prefix.Prompt { return &prefix.Prompt{Tokens: kvtest.MustTokens(spec)} }
	commit := func(cur prefix.Cursor, p *prefix.Prompt, ids ...blocks.ID) func() error {
		return func() error { _, err := x.Commit(&cur, p, ids); return err }
	}
	noop := func(name string, f func() int) badCase {
		return badCase{"Index." + name, "a negative count does nothing", func() error {
			if got := f(); got != 0 {
				return fmt.Errorf("%s(-1) = %d", name, got)
			}
			return errNoop
		}, errs(errNoop), false}
	}
	return badGroup{name: "Index", snapshot: snapshotOf(env.Dump), check: env.Check, cases: []badCase{
		{"Index.Acquire", "an uncached block", func() error { return x.Acquire([]blocks.ID{partial}) }, errs(prefix.ErrNotCached), false},
		{"Index.Pin", "an uncached block", func() error { _, err := x.Pin([]blocks.ID{partial}); return err }, errs(prefix.ErrNotCached), false},
		{"Index.Pin", "a cached block, then an uncached one", func() error { _, err := x.Pin([]blocks.ID{cachedHeld, free}); return err }, errs(prefix.ErrNotCached), false},
		{"Index.Unpin", "a block without a pin", func() error { return x.Unpin([]blocks.ID{cachedHeld}) }, errs(prefix.ErrNotPinned), false},
		{"Index.Unpin", "an unknown block", func() error { return x.Unpin([]blocks.ID{-1}) }, errs(prefix.ErrNotPinned), false},
		{"Index.SetQuota", "a quota in an index built without WithQuotas", func() error { return x.SetQuota(prefix.Namespace{Salt: "t"}, 3) }, errs(prefix.ErrInvalidArgument), false},
		{"Index.Acquire", "a cached block, then an uncached one", func() error { return x.Acquire([]blocks.ID{cachedHeld, free}) }, errs(prefix.ErrNotCached), false},
		{"Index.Acquire", "an unknown block", func() error { return x.Acquire([]blocks.ID{-3}) }, errs(prefix.ErrNotCached), false},
		{"Index.EvictBlocks", "a cached block, then one outside the pool", func() error {
			_, err := x.EvictBlocks(nil, []blocks.ID{cachedHeld, blocks.ID(env.Pool.NumBlocks())})
			return err
		}, errs(prefix.ErrInvalidArgument), false},
		{"Index.EvictBlocks", "a negative block", func() error { _, err := x.EvictBlocks(nil, []blocks.ID{evictable, -1}); return err }, errs(prefix.ErrInvalidArgument), false},
		{"Index.Release", "a cached block nobody acquired", func() error { return x.Release([]blocks.ID{evictable}) }, errs(prefix.ErrNotAcquired), false},
		{"Index.Release", "a free block", func() error { return x.Release([]blocks.ID{free}) }, errs(blocks.ErrDoubleFree), false},
		{"Index.Release", "a held block, then an unacquired one", func() error { return x.Release([]blocks.ID{partial, evictable}) }, errs(prefix.ErrNotAcquired), false},
		{"Index.Commit", "fewer tokens than the blocks cover", commit(root, prompt("600..603"), partial, free), errs(prefix.ErrLengthMismatch), false},
		{"Index.Commit", "a free block", commit(root, prompt("600..603"), free), errs(prefix.ErrNotHeld), false},
		{"Index.Commit", "a cached block only the index holds", commit(root, prompt("600..603"), evictable), errs(prefix.ErrNotHeld), false},
		{"Index.Commit", "a block cached elsewhere", commit(root, prompt("600..603"), cachedHeld), errs(prefix.ErrAlreadyCached), false},
		{"Index.Commit", "the same new block twice", commit(root, prompt("600..607"), partial, partial), errs(prefix.ErrAlreadyCached), false},
		{"Index.Commit", "another namespace's cursor", commit(root, &prefix.Prompt{Namespace: prefix.Namespace{Salt: "other"}, Tokens: kvtest.MustTokens("600..603")}, partial), errs(prefix.ErrInvalidCursor), false},
		{"Index.Reset", "while requests hold cached blocks", x.Reset, errs(prefix.ErrBlocksHeld), false},
		{"Index.SetRetention", "a priority above evict.MaxPriority", func() error {
			_, err := x.SetRetention([]blocks.ID{cachedHeld}, prefix.Retention{Priority: evict.MaxPriority + 1})
			return err
		}, errs(prefix.ErrInvalidArgument), false},
		{"Index.HoldSession", "a priority above evict.MaxPriority", func() error {
			_, err := x.HoldSession(5, []blocks.ID{cachedHeld}, prefix.Retention{Priority: 255})
			return err
		}, errs(prefix.ErrInvalidArgument), false},
		noop("Evict", func() int { return x.Evict(-1) }),
	}}
}

var errNoop = errors.New("no-op as expected")

func requiredNSCases(t *testing.T) badGroup {
	pool, err := blocks.New(9, blocks.WithNullBlock())
	require.NoError(t, err)
	x, err := prefix.New(pool, 4, prefix.WithNamespaceRequired())
	require.NoError(t, err)
	ids, err := pool.Allocate(nil, 1)
	require.NoError(t, err)
	dump := func() string {
		var b strings.Builder
		require.NoError(t, pool.WriteState(&b))
		require.NoError(t, x.WriteState(&b))
		return b.String()
	}
	t.Cleanup(func() { require.NoError(t, pool.Release(ids...)) })
	return badGroup{name: "Index/namespace-required", snapshot: snapshotOf(dump), check: x.CheckInvariants, cases: []badCase{
		{"Index.Commit", "the zero namespace where one is required", func() error {
			var cur prefix.Cursor
			_, err := x.Commit(&cur, &prefix.Prompt{Tokens: kvtest.MustTokens("0..3")}, ids)
			return err
		}, errs(prefix.ErrEmptyNamespace), false},
	}}
}

func tableCases(t *testing.T) badGroup {
	pool, err := blocks.New(9, blocks.WithNullBlock())
	require.NoError(t, err)
	tbl, err := blocktable.NewTable(pool, 4)
	require.NoError(t, err)
	_, err = tbl.Append(6, 1)
	require.NoError(t, err)
	win, err := blocktable.NewTable(pool, 4, blocktable.WithWindow(4))
	require.NoError(t, err)
	_, err = win.Append(9, 0)
	require.NoError(t, err)
	_, err = win.Append(1, 0) // releases the first block: the window starts at 7
	require.NoError(t, err)
	require.Equal(t, blocks.NullID, win.Blocks()[0])
	t.Cleanup(func() {
		require.NoError(t, tbl.Release())
		require.NoError(t, win.Release())
		require.Equal(t, pool.Capacity(), pool.NumFree())
	})
	row := []int32{77}
	slots := []int64{77}
	batch := &blocktable.Batch{MaxBlocks: 1}
	dump := func() string {
		var b strings.Builder
		require.NoError(t, pool.WriteState(&b))
		for _, tb := range []*blocktable.Table{tbl, win} {
			fmt.Fprintf(&b, "table blocks=%v len=%d reserved=%d cows=%d\n", tb.Blocks(), tb.Len(), tb.Reserved(), tb.CopyOnWrites())
		}
		fmt.Fprintf(&b, "row=%v slots=%v batch=%v/%d/%d\n", row, slots, batch.Rows(), batch.Len(), batch.Stride())
		return b.String()
	}
	check := func() error {
		for _, tb := range []*blocktable.Table{tbl, win} {
			if err := tb.CheckInvariants(); err != nil {
				return err
			}
		}
		return pool.CheckInvariants()
	}
	return badGroup{name: "Table", snapshot: snapshotOf(dump), check: check, cases: []badCase{
		{"Table.Append", "a negative count", func() error { _, err := tbl.Append(-1, 0); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"Table.Append", "a negative lookahead", func() error { _, err := tbl.Append(1, -1); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"Table.Append", "more blocks than are free", func() error { _, err := tbl.Append(20, 0); return err }, errs(blocks.ErrOutOfBlocks, blocks.ErrOutOfBlocks), false},
		{"Table.Append", "more slots than the pool has", func() error { _, err := tbl.Append(100, 0); return err }, errs(blocktable.ErrTooLarge, blocktable.ErrInvalidArgument), false},
		{"Table.Truncate", "a negative length", func() error { return tbl.Truncate(-1) }, errs(blocktable.ErrInvalidArgument), false},
		{"Table.Truncate", "past the end", func() error { return tbl.Truncate(7) }, errs(blocktable.ErrInvalidArgument), false},
		{"Table.Truncate", "into the released window", func() error { return win.Truncate(5) }, errs(blocktable.ErrInvalidArgument), false},
		{"Table.FillRow", "a row too short", func() error { _, err := tbl.FillRow(row); return err }, errs(blocktable.ErrShortBuffer), false},
		{"Table.FillSlots", "a negative position", func() error { _, err := tbl.FillSlots(-1, 0, slots); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"Table.FillSlots", "a position in the released window", func() error { _, err := win.FillSlots(1, 0, slots); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"Table.Slot", "past the reserved slots", func() error { _, err := tbl.Slot(8); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"Table.Slot", "in the released window", func() error { _, err := win.Slot(0); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"PackTables", "a batch narrower than a table", func() error {
			return blocktable.PackTables(batch, []*blocktable.Table{tbl})
		}, errs(blocktable.ErrShortBuffer), false},
	}}
}

func managerCases(t *testing.T) badGroup {
	env := badStack(t)
	m := env.Manager
	a, b, c, e := env.Seq("a"), env.Seq("b"), env.Seq("c"), env.Seq("e")
	unknown := env.Seq("nobody")
	req := func(spec string) *blocktable.Request { return &blocktable.Request{Prompt: kvtest.MustTokens(spec)} }
	row := []int32{5}
	slots := []int64{}
	batch := &blocktable.Batch{MaxBlocks: 1}
	dump := func() string {
		return env.Dump() + fmt.Sprintf("row=%v batch=%v/%d/%d\n", row, batch.Rows(), batch.Len(), batch.Stride())
	}
	return badGroup{name: "Manager", snapshot: snapshotOf(dump), check: env.Check, cases: []badCase{
		{"Manager.Admit", "a duplicate sequence", func() error { _, err := m.Admit(a, req("1")); return err }, errs(blocktable.ErrDuplicateSeq), false},
		{"Manager.Admit", "a swapped sequence's ID", func() error { _, err := m.Admit(c, req("1")); return err }, errs(blocktable.ErrDuplicateSeq), false},
		{"Manager.Admit", "a nil request", func() error { _, err := m.Admit(unknown, nil); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"Manager.Admit", "an empty prompt", func() error { _, err := m.Admit(unknown, &blocktable.Request{}); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"Manager.Admit", "a negative prefill", func() error {
			_, err := m.Admit(unknown, &blocktable.Request{Prompt: []int32{1}, Prefill: -1})
			return err
		}, errs(blocktable.ErrInvalidArgument), false},
		{"Manager.Admit", "a negative lookahead", func() error {
			_, err := m.Admit(unknown, &blocktable.Request{Prompt: []int32{1}, Lookahead: -1})
			return err
		}, errs(blocktable.ErrInvalidArgument), false},
		{"Manager.Admit", "more blocks than free and evictable", func() error { _, err := m.Admit(unknown, req("0..59")); return err }, errs(blocks.ErrOutOfBlocks, blocks.ErrOutOfBlocks), true},
		{"Manager.Admit", "more slots than the pool has", func() error { _, err := m.Admit(unknown, req("0..199")); return err }, errs(blocktable.ErrTooLarge), false},
		{"Manager.CanAdmit", "a duplicate sequence", func() error { _, err := m.CanAdmit(a, req("1")); return err }, errs(blocktable.ErrDuplicateSeq), false},
		{"Manager.CanAdmit", "more blocks than free and evictable", func() error { _, err := m.CanAdmit(unknown, req("0..59")); return err }, errs(blocks.ErrOutOfBlocks), true},
		{"Manager.Append", "an unknown sequence", func() error { _, err := m.Append(unknown, []int32{1}, 0); return err }, errs(blocktable.ErrUnknownSeq), false},
		{"Manager.Append", "a swapped sequence", func() error { _, err := m.Append(c, []int32{1}, 0); return err }, errs(blocktable.ErrNotRunning), false},
		{"Manager.Append", "a negative lookahead", func() error { _, err := m.Append(a, []int32{1}, -1); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"Manager.Append", "more blocks than free and evictable", func() error {
			_, err := m.Append(a, make([]int32, 50), 0)
			return err
		}, errs(blocks.ErrOutOfBlocks, blocks.ErrOutOfBlocks), false},
		{"Manager.Append", "more slots than the pool has", func() error {
			_, err := m.Append(a, make([]int32, 200), 0)
			return err
		}, errs(blocktable.ErrTooLarge), false},
		{"Manager.AppendToken", "an unknown sequence", func() error { _, err := m.AppendToken(unknown, 1); return err }, errs(blocktable.ErrUnknownSeq), false},
		{"Manager.AppendToken", "a swapped sequence", func() error { _, err := m.AppendToken(c, 1); return err }, errs(blocktable.ErrNotRunning), false},
		{"Manager.Finish", "an unknown sequence", func() error { return m.Finish(unknown) }, errs(blocktable.ErrUnknownSeq), false},
		{"Manager.FinishTurn", "an unknown sequence", func() error { _, err := m.FinishTurn(unknown, 1, prefix.Retention{}); return err }, errs(blocktable.ErrUnknownSeq), false},
		{"Manager.Abort", "an unknown sequence", func() error { return m.Abort(unknown) }, errs(blocktable.ErrUnknownSeq), false},
		{"Manager.Fork", "an unknown parent", func() error { return m.Fork(unknown, unknown+1) }, errs(blocktable.ErrUnknownSeq), false},
		{"Manager.Fork", "a swapped parent", func() error { return m.Fork(c, unknown) }, errs(blocktable.ErrNotRunning), false},
		{"Manager.Fork", "a child that exists", func() error { return m.Fork(a, b) }, errs(blocktable.ErrDuplicateSeq), false},
		{"Manager.Truncate", "an unknown sequence", func() error { return m.Truncate(unknown, 0) }, errs(blocktable.ErrUnknownSeq), false},
		{"Manager.Truncate", "a swapped sequence", func() error { return m.Truncate(c, 0) }, errs(blocktable.ErrNotRunning), false},
		{"Manager.Truncate", "a negative length", func() error { return m.Truncate(a, -1) }, errs(blocktable.ErrInvalidArgument), false},
		{"Manager.Truncate", "past the end", func() error { return m.Truncate(a, 11) }, errs(blocktable.ErrInvalidArgument), false},
		{"Manager.Preempt", "a negative need", func() error { _, err := m.Preempt(blocktable.PreemptRequest{Need: -1}, nil); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"Manager.Preempt", "an unknown mode", func() error { _, err := m.Preempt(blocktable.PreemptRequest{Need: 1, Mode: 9}, nil); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"Manager.Preempt", "more than every candidate frees", func() error { _, err := m.Preempt(blocktable.PreemptRequest{Need: 100}, nil); return err }, errs(blocks.ErrOutOfBlocks), false},
		{"Manager.Preempt", "every candidate protected", func() error {
			_, err := m.Preempt(blocktable.PreemptRequest{Need: 1, Protect: []blocktable.SeqID{a, b, e}}, nil)
			return err
		}, errs(blocks.ErrOutOfBlocks), false},
		{"Manager.Preempt", "a swap larger than the host tier's room", func() error {
			_, err := m.Preempt(blocktable.PreemptRequest{Need: 3, Mode: blocktable.Swap, Protect: []blocktable.SeqID{e}}, nil)
			return err
		}, errs(prefix.ErrTierFull), false},
		{"Manager.PreemptSeq", "an unknown sequence", func() error { _, err := m.PreemptSeq(unknown, blocktable.Recompute); return err }, errs(blocktable.ErrUnknownSeq), false},
		{"Manager.PreemptSeq", "a swapped sequence", func() error { _, err := m.PreemptSeq(c, blocktable.Recompute); return err }, errs(blocktable.ErrNotRunning), false},
		{"Manager.PreemptSeq", "an unknown mode", func() error { _, err := m.PreemptSeq(a, 9); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"Manager.PreemptSeq", "a swap larger than the host tier's room", func() error { _, err := m.PreemptSeq(a, blocktable.Swap); return err }, errs(prefix.ErrTierFull), true},
		{"Manager.Resume", "an unknown sequence", func() error { _, err := m.Resume(unknown); return err }, errs(blocktable.ErrUnknownSeq), false},
		{"Manager.Resume", "a running sequence", func() error { _, err := m.Resume(a); return err }, errs(blocktable.ErrNotRunning), false},
		{"Manager.Resume", "a device without room", func() error {
			env.Shrink(env.Pool.Capacity())
			defer env.Heal()
			_, err := m.Resume(c)
			return err
		}, errs(blocks.ErrOutOfBlocks), true},
		{"Index.Hold", "a block not cached", func() error {
			tbl, _ := m.Blocks(e)
			_, err := env.Index.Hold(tbl[len(tbl)-1:])
			return err
		}, errs(prefix.ErrNotCached), false},
		{"Index.Hold", "more blocks than the host tier has room for", func() error {
			tbl, _ := m.Blocks(a)
			_, err := env.Index.Hold(tbl[:2])
			return err
		}, errs(prefix.ErrTierFull), false},
		{"Index.ReleaseHold", "an unknown hold", func() error { return env.Index.ReleaseHold(1 << 40) }, errs(prefix.ErrUnknownHold), false},
		{"Manager.Blocks", "a swapped sequence", func() error { _, err := m.Blocks(c); return err }, errs(blocktable.ErrNotRunning), false},
		{"Manager.Tokens", "an unknown sequence", func() error { _, err := m.Tokens(unknown); return err }, errs(blocktable.ErrUnknownSeq), false},
		{"Manager.AppendInputs", "an unknown sequence", func() error { _, err := m.AppendInputs(nil, unknown); return err }, errs(blocktable.ErrUnknownSeq), false},
		{"Manager.AppendTokens", "an unknown sequence", func() error { _, err := m.AppendTokens(nil, unknown); return err }, errs(blocktable.ErrUnknownSeq), false},
		{"Manager.AppendBlocks", "a swapped sequence", func() error { _, err := m.AppendBlocks(nil, c); return err }, errs(blocktable.ErrNotRunning), false},
		{"Manager.Seq", "an unknown sequence", func() error { _, err := m.Seq(unknown); return err }, errs(blocktable.ErrUnknownSeq), false},
		{"Manager.EvictBlocks", "a block outside the pool", func() error { _, err := m.EvictBlocks([]blocks.ID{blocks.ID(env.Pool.NumBlocks())}); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"Manager.Slot", "a position past the table", func() error { _, err := m.Slot(a, 12); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"Manager.Slot", "a swapped sequence", func() error { _, err := m.Slot(c, 0); return err }, errs(blocktable.ErrNotRunning), false},
		{"Manager.FillSlots", "a negative position", func() error { _, err := m.FillSlots(a, -1, 0, slots); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"Manager.FillRow", "a row too short", func() error { _, err := m.FillRow(a, row); return err }, errs(blocktable.ErrShortBuffer), false},
		{"Manager.Pack", "an unknown sequence", func() error { return m.Pack(batch, []blocktable.SeqID{a, unknown}) }, errs(blocktable.ErrUnknownSeq), false},
		{"Manager.Pack", "a batch narrower than a table", func() error { return m.Pack(batch, []blocktable.SeqID{a}) }, errs(blocktable.ErrShortBuffer), false},
	}}
}

func noHostCases(t *testing.T) badGroup {
	env := kvtest.New(t, kvtest.Config{})
	m := env.Manager
	a := env.Seq("a")
	_, err := m.Admit(a, &blocktable.Request{Prompt: kvtest.MustTokens("0..5")})
	require.NoError(t, err)
	t.Cleanup(env.AbortAll)
	return badGroup{name: "Manager/no-host-tier", snapshot: snapshotOf(env.Dump), check: env.Check, cases: []badCase{
		{"Manager.Preempt", "swap mode without lower tiers", func() error {
			_, err := m.Preempt(blocktable.PreemptRequest{Need: 1, Mode: blocktable.Swap}, nil)
			return err
		}, errs(blocktable.ErrSwapNeedsTiers), false},
		{"Manager.PreemptSeq", "swap mode without lower tiers", func() error { _, err := m.PreemptSeq(a, blocktable.Swap); return err }, errs(blocktable.ErrSwapNeedsTiers), false},
	}}
}

// constructorCases reject bad configurations; there is no state to change.
func constructorCases() badGroup {
	pool, _ := blocks.New(5)
	return badGroup{name: "constructors", snapshot: func(bool) string { return "" }, cases: []badCase{
		{"blocks.New", "no usable block", func() error { _, err := blocks.New(1, blocks.WithNullBlock()); return err }, errs(blocks.ErrInvalidArgument), false},
		{"blocks.New", "a negative capacity", func() error { _, err := blocks.New(-4); return err }, errs(blocks.ErrInvalidArgument), false},
		{"prefix.New", "a nil pool", func() error { _, err := prefix.New(nil, 4); return err }, errs(prefix.ErrInvalidArgument), false},
		{"prefix.New", "a zero block size", func() error { _, err := prefix.New(pool, 0); return err }, errs(prefix.ErrInvalidArgument), false},
		{"blocktable.NewTable", "a nil pool", func() error { _, err := blocktable.NewTable(nil, 4); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"blocktable.NewTable", "a zero block size", func() error { _, err := blocktable.NewTable(pool, 0); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"blocktable.NewTable", "a window without a null block", func() error {
			_, err := blocktable.NewTable(pool, 4, blocktable.WithWindow(8))
			return err
		}, errs(blocktable.ErrInvalidArgument), false},
		{"blocktable.New", "no pool", func() error { _, err := blocktable.New(blocktable.Config{BlockSize: 4}); return err }, errs(blocktable.ErrInvalidArgument), false},
		{"blocktable.New", "a watermark of 1", func() error {
			_, err := blocktable.New(blocktable.Config{Pool: pool, BlockSize: 4, Watermark: 1})
			return err
		}, errs(blocktable.ErrInvalidArgument), false},
		{"blocktable.New", "a window without a null block", func() error {
			_, err := blocktable.New(blocktable.Config{Pool: pool, BlockSize: 4, SlidingWindow: 8})
			return err
		}, errs(blocktable.ErrInvalidArgument), false},
	}}
}

// withoutInvalidInput lists the exported methods that mutate nothing a caller can get
// wrong, or take no argument that can be invalid: queries, dumps, checks, setters of
// test hooks. Every other exported method must appear in the bad-input table.
var withoutInvalidInput = map[string]bool{
	"Pool.Available": true, "Pool.Capacity": true, "Pool.CheckInvariants": true, "Pool.Faults": true,
	"Pool.HasNullBlock": true, "Pool.NumBlocks": true, "Pool.NumFree": true, "Pool.RefCount": true,
	"Pool.SetFaults": true, "Pool.SetReclaimer": true, "Pool.Stats": true, "Pool.WriteState": true,
	"Index.BlockSize": true, "Index.CheckInvariants": true, "Index.Clock": true, "Index.Pool": true, "Index.Cursor": true, "Index.Hash": true,
	"Index.Explain": true, "Index.Hasher": true, "Index.IsCached": true, "Index.Peek": true, "Index.PlanRelease": true, "Index.RecordLookup": true, "Index.RecordResumedLookup": true, "Index.ReleaseSession": true,
	"Index.Pins": true, "Index.Pinned": true, "Index.PinBudget": true, "Index.Sessions": true, "Index.Quota": true, "Index.BumpEpoch": true, "Index.Epoch": true, "Index.Reclaimable": true,
	"Index.ReclaimableOf": true, "Index.Stats": true, "Index.WriteState": true,
	// Tier queries, and TakePlans (no argument to get wrong); the transfer calls' bad
	// input (unknown IDs, no tiers, blocks not held) is tested in prefix/tier_test.go and
	// blocktable/tiers_test.go, on an index with tiers.
	"Index.NumTiers": true, "Index.TierStatsOf": true, "Index.TransferRefs": true, "Index.PendingTransfers": true,
	"Index.PeekLower": true, "Index.RecordTierLookup": true, "Index.TakePlans": true, "Index.CompleteTransfer": true,
	"Index.PrepareLoad": true, "Index.Demote": true, "Index.HoldNeed": true, "Index.HeldBlocks": true, "Index.HoldInFlight": true, "Index.InFlightSlots": true, "Manager.TakePlans": true, "Manager.CompleteTransfer": true, "Manager.Resume": true, "Manager.NewStep": true,
	"Table.BlockSize": true, "Table.Blocks": true, "Table.AppendBlocks": true, "Table.CheckInvariants": true, "Table.CopyOnWrites": true,
	"Table.Fork": true, "Table.Len": true, "Table.Need": true, "Table.NumBlocks": true, "Table.Release": true,
	"Table.Reserved":          true,
	"Manager.CheckInvariants": true, "Manager.Config": true, "Manager.Contains": true, "Manager.Seqs": true,
	"Manager.Stats": true, "Manager.ReleaseSession": true, "Manager.BumpEpoch": true, "Manager.WriteState": true,
}

// TestBadInputCoversEveryMethod fails when an exported method of Pool, Index, Table or
// Manager is neither in the bad-input table nor listed in withoutInvalidInput: a new
// method needs its invalid arguments tested (or a line saying it has none).
func TestBadInputCoversEveryMethod(t *testing.T) {
	covered := map[string]bool{}
	for _, g := range badGroups(t) {
		for _, c := range g.cases {
			covered[c.method] = true
		}
	}
	var missing []string
	for _, v := range []any{&blocks.Pool{}, &prefix.Index{}, &blocktable.Table{}, &blocktable.Manager{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumMethod() {
			name := typ.Elem().Name() + "." + typ.Method(i).Name
			if !covered[name] && !withoutInvalidInput[name] {
				missing = append(missing, name)
			}
		}
	}
	slices.Sort(missing)
	require.Empty(t, missing, "add each to the bad-input table, or to withoutInvalidInput if it takes no invalid argument")
}
