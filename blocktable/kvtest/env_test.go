package kvtest_test

import (
	"errors"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvtest"
	"github.com/stretchr/testify/require"
)

func TestCleanupPassesWhenEverythingIsReleased(t *testing.T) {
	fake := &fakeTB{}
	env := kvtest.New(fake, kvtest.Config{})
	_, err := env.Manager.Admit(env.Seq("r1"), &blocktable.Request{Prompt: kvtest.MustTokens("0..9")})
	require.NoError(t, err)
	require.NoError(t, env.Manager.Finish(env.Seq("r1")))
	fake.finish()
	require.Empty(t, fake.report())
}

func TestCleanupNamesTheSequencesThatLeak(t *testing.T) {
	fake := &fakeTB{}
	env := kvtest.New(fake, kvtest.Config{})
	m := env.Manager
	_, err := m.Admit(env.Seq("r1"), &blocktable.Request{Prompt: kvtest.MustTokens("0..9")})
	require.NoError(t, err)
	require.NoError(t, m.Fork(env.Seq("r1"), env.Seq("r2")))
	_, err = m.Admit(env.Seq("done"), &blocktable.Request{Prompt: kvtest.MustTokens("100..101")})
	require.NoError(t, err)
	require.NoError(t, m.Finish(env.Seq("done")))

	require.ErrorIs(t, env.CheckLeaks(), kvtest.ErrLeak)
	leaks := env.Leaks()
	require.Equal(t, []kvtest.Leak{
		{Block: 1, Refs: 3, Holders: []string{"r1", "r2"}, Cached: true},
		{Block: 2, Refs: 3, Holders: []string{"r1", "r2"}, Cached: true},
		{Block: 3, Refs: 2, Holders: []string{"r1", "r2"}},
	}, leaks)

	fake.finish()
	require.Len(t, fake.errors, 1)
	require.Contains(t, fake.errors[0], "sequences never finished or aborted: r1, r2")
	require.Contains(t, fake.errors[0], "block 3: refcount 2, held by r1, r2")
	require.NotContains(t, fake.errors[0], "done")
}

func TestCleanupReportsAHolderOutsideTheManager(t *testing.T) {
	fake := &fakeTB{}
	env := kvtest.New(fake, kvtest.Config{})
	ids, err := env.Pool.Allocate(nil, 1) // a block nobody the Manager knows holds
	require.NoError(t, err)
	fake.finish()
	require.Len(t, fake.errors, 1)
	require.Contains(t, fake.errors[0], "broken invariant")
	require.NoError(t, env.Pool.Release(ids...))
	require.NoError(t, env.Check())
}

func TestAbortAllClearsLeaks(t *testing.T) {
	fake := &fakeTB{}
	env := kvtest.New(fake, kvtest.Config{HostBlocks: 8})
	m := env.Manager
	for _, name := range []string{"a", "b"} {
		_, err := m.Admit(env.Seq(name), &blocktable.Request{Prompt: kvtest.MustTokens("0..5")})
		require.NoError(t, err)
	}
	_, err := m.PreemptSeq(env.Seq("b"), blocktable.Swap)
	require.NoError(t, err)
	require.ErrorContains(t, env.CheckLeaks(), "b (swapped)")
	env.AbortAll()
	fake.finish()
	require.Empty(t, fake.report())
}

func TestNewRejectsABadConfig(t *testing.T) {
	fake := &fakeTB{}
	require.Nil(t, kvtest.New(fake, kvtest.Config{Blocks: 1}))
	require.Len(t, fake.fatals, 1)
	require.Contains(t, fake.fatals[0], "no usable block")
}

func TestSeqNames(t *testing.T) {
	env := kvtest.New(t, kvtest.Config{})
	require.Equal(t, blocktable.SeqID(1), env.Seq("a"))
	env.NameSeq(2, "b")
	require.Equal(t, blocktable.SeqID(3), env.Seq("c"), "IDs named by hand are skipped")
	require.Equal(t, blocktable.SeqID(2), env.Seq("b"))
	require.Equal(t, "seq 9", env.Name(9))
}

func TestFaults(t *testing.T) {
	env := kvtest.New(t, kvtest.Config{})
	m := env.Manager
	env.FailAllocation(1)
	_, err := m.Admit(env.Seq("r1"), &blocktable.Request{Prompt: kvtest.MustTokens("0..5")})
	var oob *blocks.OutOfBlocksError
	require.True(t, errors.As(err, &oob))
	require.ErrorIs(t, err, blocks.ErrOutOfBlocks)
	require.Equal(t, 1, env.Faults().Tripped)
	_, err = m.Admit(env.Seq("r1"), &blocktable.Request{Prompt: kvtest.MustTokens("0..5")})
	require.NoError(t, err, "the failure is delivered once")

	env.Shrink(env.Pool.Stats().Free)
	_, err = m.Append(env.Seq("r1"), kvtest.MustTokens("6..9"), 0)
	require.ErrorIs(t, err, blocks.ErrOutOfBlocks)
	require.Equal(t, 0, env.Pool.NumFree())
	env.Heal()
	require.Nil(t, env.Faults())
	_, err = m.Append(env.Seq("r1"), kvtest.MustTokens("6..9"), 0)
	require.NoError(t, err)
	require.NoError(t, m.Finish(env.Seq("r1")))
}

func TestClockIsShared(t *testing.T) {
	env := kvtest.New(t, kvtest.Config{})
	env.Clock.Advance(100)
	_, err := env.Manager.Admit(env.Seq("r1"), &blocktable.Request{Prompt: kvtest.MustTokens("0..7")})
	require.NoError(t, err)
	info, err := env.Manager.Seq(env.Seq("r1"))
	require.NoError(t, err)
	require.Greater(t, info.Arrival, uint64(100), "the Manager stamps arrivals on the shared clock")
	require.NoError(t, env.Manager.Finish(env.Seq("r1")))
	require.Contains(t, env.Dump(), "last=10", "the index touched its blocks on the same clock")
}

func TestRecorders(t *testing.T) {
	env := kvtest.New(t, kvtest.Config{Blocks: 9, Eviction: "lru"})
	m := env.Manager
	for i, name := range []string{"a", "b"} {
		_, err := m.Admit(env.Seq(name), &blocktable.Request{Prompt: kvtest.MustTokens([]string{"0..8", "100..108"}[i])})
		require.NoError(t, err)
	}
	_, err := m.Preempt(blocktable.PreemptRequest{Need: 1}, nil)
	require.NoError(t, err)
	require.Equal(t, [][]blocktable.SeqID{{env.Seq("b")}}, env.Preemptions.Choices())
	require.NoError(t, m.Finish(env.Seq("a")))
	require.Equal(t, 3, env.Index.Evict(3))
	require.Equal(t, []blocks.ID{5, 4, 2}, env.Evictions.Victims())
	require.Equal(t, []string{
		"preempt need=1 policy=fcfs candidates a(arrival=1 priority=0 computed=9 held=3 freeable=3) b(arrival=3 priority=0 computed=9 held=3 freeable=3) -> b",
		"victim 5 policy=lru last=5 hits=1",
		"victim 4 policy=lru last=6 hits=1",
		"victim 2 policy=lru last=7 hits=1",
		"evicted 5,4,2",
	}, env.Log.Take())
	require.Zero(t, env.Log.Len())
}
