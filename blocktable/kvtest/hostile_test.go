package kvtest_test

import (
	"math"
	"strconv"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvtest"
	"github.com/kvpage/kvpage/internal/testhook"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// Issue 13 items 9-13: sizes, counts and positions at the extremes of int. Each call returns
// a typed error (errors.Is) and leaves the whole-state dump exactly as it was. On the code
// before this test, Admit with Lookahead near math.MaxInt succeeded with a negative block
// count (committing a recycled record's stale block IDs under another tenant), Append with
// lookahead math.MaxInt succeeded and reserved nothing, MaxTokens 1<<40 was a fatal
// out-of-memory, and a negative MaxTokens was accepted.
func TestHostileIntegersChangeNothing(t *testing.T) {
	env := badStack(t)
	m := env.Manager
	a, e := env.Seq("a"), env.Seq("e")
	// A recycled sequence record, as in the issue: finished sequences leave theirs for reuse.
	_, err := m.Admit(env.Seq("tmp"), &blocktable.Request{Prompt: kvtest.MustTokens("700..707")})
	require.NoError(t, err)
	require.NoError(t, m.Abort(env.Seq("tmp")))
	fresh := env.Seq("fresh")
	admit := func(r blocktable.Request) func() error {
		return func() error { _, err := m.Admit(fresh, &r); return err }
	}
	canAdmit := func(r blocktable.Request) func() error {
		return func() error { _, err := m.CanAdmit(fresh, &r); return err }
	}
	prompt := kvtest.MustTokens("0..9") // hits a's cached prefix
	big := []error{blocktable.ErrTooLarge, blocktable.ErrInvalidArgument}
	invalid := []error{blocktable.ErrInvalidArgument}
	slots := make([]int64, 4)
	var cases []badCase
	for _, n := range []int{math.MaxInt, math.MaxInt - 1, math.MaxInt - 9, math.MaxInt - 10, math.MaxInt/2 + 1, 1 << 40, 55} {
		cases = append(cases,
			badCase{"Manager.Admit", "lookahead " + itoa(n), admit(blocktable.Request{Prompt: prompt, Lookahead: n}), big, false},
			badCase{"Manager.CanAdmit", "lookahead " + itoa(n), canAdmit(blocktable.Request{Prompt: prompt, Lookahead: n}), big, false},
			badCase{"Manager.Admit", "max tokens " + itoa(max(n, n+10)), admit(blocktable.Request{Prompt: prompt, MaxTokens: max(n, n+10)}), big, false},
			badCase{"Manager.Admit", "lookahead and prefill " + itoa(n), admit(blocktable.Request{Prompt: prompt, Prefill: n, Lookahead: n}), big, false},
			badCase{"Manager.Append", "lookahead " + itoa(n), func() error { _, err := m.Append(a, []int32{1}, n); return err }, big, false},
			badCase{"Manager.Append", "no token, lookahead " + itoa(n), func() error { _, err := m.Append(e, nil, n); return err }, big, false},
			badCase{"Manager.Truncate", "to " + itoa(n), func() error { return m.Truncate(a, n) }, invalid, false},
			badCase{"Manager.Slot", "position " + itoa(n), func() error { _, err := m.Slot(a, n); return err }, invalid, false},
			badCase{"Manager.FillSlots", "from " + itoa(n), func() error { _, err := m.FillSlots(a, n, 0, slots); return err }, invalid, false},
			badCase{"Manager.FillSlots", "lookahead " + itoa(n), func() error { _, err := m.FillSlots(e, 10, n, slots); return err }, invalid, false},
			badCase{"Manager.Preempt", "need " + itoa(n), func() error { _, err := m.Preempt(blocktable.PreemptRequest{Need: n}, nil); return err }, []error{blocks.ErrOutOfBlocks}, false},
			badCase{"Pool.Allocate", "count " + itoa(n), func() error { _, err := env.Pool.Allocate(nil, n); return err }, []error{blocks.ErrOutOfBlocks}, true},
		)
	}
	for _, n := range []int{-1, math.MinInt} {
		cases = append(cases,
			badCase{"Manager.Admit", "max tokens " + itoa(n), admit(blocktable.Request{Prompt: prompt, MaxTokens: n}), invalid, false},
			badCase{"Manager.Admit", "lookahead " + itoa(n), admit(blocktable.Request{Prompt: prompt, Lookahead: n}), invalid, false},
			badCase{"Manager.Admit", "prefill " + itoa(n), admit(blocktable.Request{Prompt: prompt, Prefill: n}), invalid, false},
			badCase{"Manager.Append", "lookahead " + itoa(n), func() error { _, err := m.Append(a, []int32{1}, n); return err }, invalid, false},
			badCase{"Manager.FillSlots", "lookahead " + itoa(n), func() error { _, err := m.FillSlots(e, 10, n, slots); return err }, invalid, false},
			badCase{"Manager.Preempt", "need " + itoa(n), func() error { _, err := m.Preempt(blocktable.PreemptRequest{Need: n}, nil); return err }, invalid, false},
			badCase{"Pool.Allocate", "count " + itoa(n), func() error { _, err := env.Pool.Allocate(nil, n); return err }, []error{blocks.ErrInvalidArgument}, false},
		)
	}
	cases = append(cases,
		badCase{"Manager.Admit", "a prompt longer than the pool", admit(blocktable.Request{Prompt: make([]int32, 65)}), big, false},
		badCase{"Manager.Admit", "a prompt that fits, lookahead that does not", admit(blocktable.Request{Prompt: make([]int32, 60), Lookahead: 5}), big, false},
		badCase{"Manager.Resume", "a swapped sequence, then a running one", func() error { _, err := m.Resume(a); return err }, []error{blocktable.ErrNotRunning}, false},
	)
	runBadCases(t, snapshotOf(env.Dump), cases, env.Check)
}

// A huge Prefill is a cap past the prompt: it admits the whole prompt. Before, hitTokens +
// Prefill overflowed and a prompt with a hit was admitted with only the hit.
func TestPrefillMaxIntAdmitsTheWholePrompt(t *testing.T) {
	env := kvtest.New(t, kvtest.Config{})
	m := env.Manager
	_, err := m.Admit(env.Seq("a"), &blocktable.Request{Prompt: kvtest.MustTokens("0..9")})
	require.NoError(t, err)
	res, err := m.Admit(env.Seq("b"), &blocktable.Request{Prompt: kvtest.MustTokens("0..13"), Prefill: math.MaxInt})
	require.NoError(t, err)
	require.Equal(t, blocktable.AdmitResult{HitTokens: 8, HitBlocks: 2, NewBlocks: 2, Tokens: 14}, res)
	require.NoError(t, env.Check())
	env.AbortAll()
}

// Issue 13 item 11: a NaN watermark passed validation and the first tight Admit panicked.
// Every watermark outside [0, 1) is refused.
func TestNewRefusesBadWatermarks(t *testing.T) {
	pool, err := blocks.New(9)
	require.NoError(t, err)
	for _, w := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1, -0.1, 1e308, -math.SmallestNonzeroFloat64} {
		_, err := blocktable.New(blocktable.Config{Pool: pool, BlockSize: 4, Watermark: w})
		require.ErrorIs(t, err, blocktable.ErrInvalidArgument, "watermark %v", w)
	}
	for _, bs := range []int{0, -1, math.MinInt, prefix.MaxBlockSize + 1, math.MaxInt} {
		_, err := blocktable.New(blocktable.Config{Pool: pool, BlockSize: bs})
		require.ErrorIs(t, err, blocktable.ErrInvalidArgument, "block size %d", bs)
	}
	_, err = blocktable.New(blocktable.Config{Pool: pool, BlockSize: 4, Watermark: math.Nextafter(1, 0)})
	require.NoError(t, err, "the largest watermark below 1")
}

// Issue 14 item 5: a Manager whose pool, block size or clock differs from its index's was
// accepted and then panicked with a broken invariant in Admit. New takes them from the
// index, or refuses ones that disagree.
func TestNewTakesPoolBlockSizeAndClockFromTheIndex(t *testing.T) {
	pool, err := blocks.New(9, blocks.WithNullBlock())
	require.NoError(t, err)
	other, err := blocks.New(9, blocks.WithNullBlock())
	require.NoError(t, err)
	clock := &kvtest.Clock{}
	idx, err := prefix.New(pool, 4, prefix.WithClock(clock))
	require.NoError(t, err)
	for name, cfg := range map[string]blocktable.Config{
		"another pool":       {Pool: other, Index: idx},
		"another block size": {Index: idx, BlockSize: 8},
		"another clock":      {Index: idx, Clock: &kvtest.Clock{}},
	} {
		_, err := blocktable.New(cfg)
		require.ErrorIs(t, err, blocktable.ErrInvalidArgument, name)
	}
	m, err := blocktable.New(blocktable.Config{Index: idx})
	require.NoError(t, err)
	got := m.Config()
	require.Same(t, pool, got.Pool)
	require.Equal(t, 4, got.BlockSize)
	require.Equal(t, clock, got.Clock)
	res, err := m.Admit(1, &blocktable.Request{Prompt: kvtest.MustTokens("0..5")})
	require.NoError(t, err)
	require.Equal(t, 2, res.NewBlocks)
	require.NoError(t, m.CheckInvariants())
	require.NoError(t, m.Abort(1))
	_, err = blocktable.New(blocktable.Config{Pool: pool, Index: idx, BlockSize: 4, Clock: clock})
	require.NoError(t, err, "the index's own pool, block size and clock, passed again")
}

// Issue 13 item 12 (a SwapIn that failed for lack of blocks created a namespace root
// first), for Resume: with the sequence's blocks demoted to the host and its namespace's
// root gone from the device, a Resume that fails for lack of blocks leaves the index (and
// everything else) unchanged, its hold included.
func TestFailedResumeCreatesNoNamespaceRoot(t *testing.T) {
	env := kvtest.New(t, kvtest.Config{HostBlocks: 8})
	m := env.Manager
	s := env.Seq("s")
	_, err := m.Admit(s, &blocktable.Request{Namespace: prefix.Namespace{Salt: "t1"}, Prompt: kvtest.MustTokens("0..9")})
	require.NoError(t, err)
	_, err = m.PreemptSeq(s, blocktable.Swap)
	require.NoError(t, err)
	for _, p := range m.TakePlans(nil) {
		_, err := m.CompleteTransfer(p.ID, true)
		require.NoError(t, err)
	}
	require.Zero(t, env.Index.Stats().Cached, "its committed path left the device")
	require.Equal(t, 2, m.Stats().HostInUse)
	env.Shrink(env.Pool.Capacity())
	before := env.Dump()
	_, err = m.Resume(s)
	require.ErrorIs(t, err, blocks.ErrOutOfBlocks)
	require.Equal(t, before, env.Dump(), "a failed Resume changed the state")
	env.Heal()
	res, err := m.Resume(s)
	require.NoError(t, err)
	require.Equal(t, 8, res.LoadTokens, "the held blocks are loaded")
	require.NoError(t, env.Check())
	for _, p := range m.TakePlans(nil) {
		_, err := m.CompleteTransfer(p.ID, true)
		require.NoError(t, err)
	}
	env.AbortAll()
}

// Issue 13 item 13 through the Manager: a prefix hit, a fork or a resume that would give a
// block more than blocks.MaxRefCount holders is refused with a typed error, nothing
// changed, instead of wrapping the count (or panicking on a broken invariant).
func TestRefCountOverflowIsRefused(t *testing.T) {
	env := kvtest.New(t, kvtest.Config{HostBlocks: 8})
	m := env.Manager
	a := env.Seq("a")
	_, err := m.Admit(a, &blocktable.Request{Prompt: kvtest.MustTokens("0..9")})
	require.NoError(t, err)
	w := env.Seq("w")
	_, err = m.Admit(w, &blocktable.Request{Prompt: kvtest.MustTokens("0..9")})
	require.NoError(t, err)
	_, err = m.PreemptSeq(w, blocktable.Swap)
	require.NoError(t, err)
	tbl, err := m.Blocks(a)
	require.NoError(t, err)
	hot := tbl[0]
	rc := env.Pool.RefCount(hot)
	testhook.SetRefCount(env.Pool, int32(hot), blocks.MaxRefCount)
	b, c := env.Seq("b"), env.Seq("c")
	cases := []badCase{
		{"Manager.Admit", "a hit on a block with MaxRefCount holders", func() error {
			_, err := m.Admit(b, &blocktable.Request{Prompt: kvtest.MustTokens("0..9")})
			return err
		}, errs(blocks.ErrRefCountOverflow), false},
		{"Manager.CanAdmit", "a hit on a block with MaxRefCount holders", func() error {
			_, err := m.CanAdmit(b, &blocktable.Request{Prompt: kvtest.MustTokens("0..9")})
			return err
		}, errs(blocks.ErrRefCountOverflow), false},
		{"Manager.Fork", "a block with MaxRefCount holders", func() error { return m.Fork(a, c) }, errs(blocks.ErrRefCountOverflow), false},
		{"Manager.Resume", "a cached prefix block with MaxRefCount holders", func() error { _, err := m.Resume(w); return err }, errs(blocks.ErrRefCountOverflow), true},
		{"Index.Acquire", "a block with MaxRefCount holders", func() error { return env.Index.Acquire([]blocks.ID{hot}) }, errs(blocks.ErrRefCountOverflow), false},
		{"Pool.Retain", "a block with MaxRefCount holders", func() error { return env.Pool.Retain(hot) }, errs(blocks.ErrRefCountOverflow), false},
	}
	runBadCases(t, snapshotOf(env.Dump), cases, nil)
	testhook.SetRefCount(env.Pool, int32(hot), int32(rc))
	require.NoError(t, env.Check())
	env.AbortAll()
}

// requirePrivateSlots asserts that FillSlots returns seq's positions [from, Len+lookahead),
// padded with -1, and that every reserved slot among them lies in a block seq alone holds.
func requirePrivateSlots(t *testing.T, env *kvtest.Env, seq blocktable.SeqID, from, lookahead int) []int64 {
	t.Helper()
	info, err := env.Manager.Seq(seq)
	require.NoError(t, err)
	dst := make([]int64, info.Tokens+lookahead-from+2)
	n, err := env.Manager.FillSlots(seq, from, lookahead, dst)
	require.NoError(t, err)
	require.Equal(t, info.Tokens+lookahead-from, n)
	require.Equal(t, []int64{-1, -1}, dst[n:], "padding")
	bs := int64(env.Config().BlockSize)
	for i, slot := range dst[:n] {
		if from+i < info.Tokens {
			continue // a token's slot: its block may be cached already, as vLLM caches it
		}
		b := blocks.ID(slot / bs)
		require.Equal(t, 1, env.Pool.RefCount(b), "slot %d (position %d) lies in block %d, shared", slot, from+i, b)
	}
	return dst[:n]
}

// Issue 13 item 16: reserved slots skipped copy-on-write. After Fork, Append(child, nil, 1)
// handed out a slot inside the parent's block; after Truncate(6) of an 8-token cached
// prefix, a slot inside a cached block with refcount 2. Every slot handed out for writing
// now lies in a block private to the sequence: reserving copies a shared block first.
func TestReservedSlotsArePrivate(t *testing.T) {
	t.Run("fork then reserve", func(t *testing.T) {
		env := kvtest.New(t, kvtest.Config{})
		m := env.Manager
		p, c := env.Seq("parent"), env.Seq("child")
		_, err := m.Admit(p, &blocktable.Request{Prompt: kvtest.MustTokens("0..5")})
		require.NoError(t, err)
		require.NoError(t, m.Fork(p, c))
		res, err := m.Append(c, nil, 1)
		require.NoError(t, err)
		require.True(t, res.Copied, "reserving a slot in the shared block copies it")
		require.Zero(t, res.NewBlocks, "the copy replaces the shared block: the table does not grow")
		requirePrivateSlots(t, env, c, 6, 1)
		info, _ := m.Seq(c)
		require.Equal(t, 1, info.Reserved)
		res, err = m.Append(p, nil, 2)
		require.NoError(t, err)
		require.False(t, res.Copied, "the child copied away: the parent's block is its own again")
		requirePrivateSlots(t, env, p, 6, 2)
		require.NoError(t, env.Check())
		env.AbortAll()
	})
	t.Run("reserve then fork", func(t *testing.T) {
		env := kvtest.New(t, kvtest.Config{})
		m := env.Manager
		p, c := env.Seq("parent"), env.Seq("child")
		_, err := m.Admit(p, &blocktable.Request{Prompt: kvtest.MustTokens("0..5"), Lookahead: 3})
		require.NoError(t, err)
		requirePrivateSlots(t, env, p, 0, 3)
		require.NoError(t, m.Fork(p, c))
		// The parent's reserved slots began in the block the fork now shares: the
		// reservation is gone, and asking for those slots is refused.
		info, _ := m.Seq(p)
		require.Zero(t, info.Reserved)
		_, err = m.FillSlots(p, 6, 1, make([]int64, 4))
		require.ErrorIs(t, err, blocktable.ErrInvalidArgument)
		_, err = m.Slot(p, 6)
		require.ErrorIs(t, err, blocktable.ErrInvalidArgument)
		res, err := m.Append(p, nil, 3)
		require.NoError(t, err)
		require.True(t, res.Copied)
		requirePrivateSlots(t, env, p, 6, 3)
		require.NoError(t, env.Check())
		env.AbortAll()
	})
	t.Run("truncate into a cached prefix", func(t *testing.T) {
		env := kvtest.New(t, kvtest.Config{})
		m := env.Manager
		a, b := env.Seq("a"), env.Seq("b")
		_, err := m.Admit(a, &blocktable.Request{Prompt: kvtest.MustTokens("0..8")})
		require.NoError(t, err)
		_, err = m.Admit(b, &blocktable.Request{Prompt: kvtest.MustTokens("0..8")}) // shares the 8 cached tokens
		require.NoError(t, err)
		require.NoError(t, m.Truncate(b, 6))
		info, _ := m.Seq(b)
		require.Zero(t, info.Reserved, "truncate cancels reservations")
		_, err = m.Slot(b, 6)
		require.ErrorIs(t, err, blocktable.ErrInvalidArgument, "position 6 lies in a cached block: not reserved")
		res, err := m.Append(b, nil, 1)
		require.NoError(t, err)
		require.True(t, res.Copied)
		requirePrivateSlots(t, env, b, 6, 1)
		res, err = m.Append(b, []int32{60}, 2) // writes position 6, reserves 7 and 8
		require.NoError(t, err)
		require.False(t, res.Copied)
		requirePrivateSlots(t, env, b, 6, 2)
		require.NoError(t, env.Check())
		env.AbortAll()
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// A Batch's stride comes from the caller (MaxBlocks): MaxBlocks x rows beyond
// blocktable.MaxBatchEntries is refused rather than allocated.
func TestPackRefusesAbsurdStride(t *testing.T) {
	env := kvtest.New(t, kvtest.Config{})
	m := env.Manager
	a := env.Seq("a")
	_, err := m.Admit(a, &blocktable.Request{Prompt: kvtest.MustTokens("0..5")})
	require.NoError(t, err)
	for _, mb := range []int{blocktable.MaxBatchEntries + 1, math.MaxInt} {
		b := &blocktable.Batch{MaxBlocks: mb}
		require.ErrorIs(t, m.Pack(b, []blocktable.SeqID{a}), blocktable.ErrTooLarge, "MaxBlocks %d", mb)
		require.Zero(t, b.Len())
		tbl, err := blocktable.NewTable(env.Pool, 4)
		require.NoError(t, err)
		require.ErrorIs(t, blocktable.PackTables(b, []*blocktable.Table{tbl, tbl}), blocktable.ErrTooLarge)
	}
	env.AbortAll()
}

// Multimodal inputs are sizes too. An input whose Offset+Length wraps, or one out of Offset
// order, was skipped for the blocks it overlaps: those blocks lost the image's hash and a
// prompt with another image and the same placeholder tokens hit them. Admit refuses such
// inputs (and any past the prompt); the index's Commit refuses them and Match finds nothing.
func TestMultimodalInputsAreChecked(t *testing.T) {
	env := kvtest.New(t, kvtest.Config{})
	m := env.Manager
	prompt := kvtest.MustTokens("1..3,900*8,4..7")
	a := env.Seq("a")
	_, err := m.Admit(a, &blocktable.Request{Prompt: prompt, MM: []prefix.MMInput{{Hash: "cat", Offset: 3, Length: 8}}})
	require.NoError(t, err)
	fresh := env.Seq("b")
	cases := []badCase{}
	for name, mm := range map[string][]prefix.MMInput{
		"a length that wraps":    {{Hash: "dog", Offset: 3, Length: math.MaxInt}},
		"a length past the end":  {{Hash: "dog", Offset: 3, Length: 13}},
		"a negative offset":      {{Hash: "dog", Offset: -1, Length: 4}},
		"a negative length":      {{Hash: "dog", Offset: 3, Length: -8}},
		"an offset past the end": {{Hash: "dog", Offset: 16, Length: 0}},
		"out of Offset order":    {{Hash: "x", Offset: 12, Length: 2}, {Hash: "dog", Offset: 3, Length: 8}},
	} {
		cases = append(cases, badCase{"Manager.Admit", name, func() error {
			_, err := m.Admit(fresh, &blocktable.Request{Prompt: prompt, MM: mm})
			return err
		}, errs(blocktable.ErrInvalidArgument), false})
	}
	runBadCases(t, snapshotOf(env.Dump), cases, env.Check)

	// Straight to the index: no hit on the cat's blocks for a dog whose length wraps.
	p := &prefix.Prompt{Tokens: prompt, MM: []prefix.MMInput{{Hash: "dog", Offset: 3, Length: math.MaxInt}}}
	hit, _ := env.Index.Peek(nil, p, prefix.LeaveOne)
	require.Empty(t, hit)
	var cur prefix.Cursor
	_, err = env.Index.Commit(&cur, p, nil)
	require.ErrorIs(t, err, prefix.ErrInvalidArgument)
	env.AbortAll()
}
