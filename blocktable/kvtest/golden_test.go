package kvtest_test

import (
	"testing"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvtest"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// goldenStack drives a stack into a state that touches every part of the dump: two
// namespaces, a multimodal block, a fork after copy-on-write, a swapped sequence,
// evictions, lookahead, a fault.
func goldenStack(t *testing.T) *kvtest.Env {
	env := kvtest.New(t, kvtest.Config{Blocks: 17, BlockSize: 4, HostBlocks: 6})
	m := env.Manager
	admit := func(name string, req blocktable.Request) {
		_, err := m.Admit(env.Seq(name), &req)
		require.NoError(t, err)
	}
	admit("chat", blocktable.Request{Prompt: kvtest.MustTokens("0..9")})
	require.NoError(t, m.Fork(env.Seq("chat"), env.Seq("sample")))
	_, err := m.Append(env.Seq("sample"), kvtest.MustTokens("70..72"), 2)
	require.NoError(t, err)
	admit("tenant", blocktable.Request{Namespace: prefix.Namespace{Salt: "t1"}, Prompt: kvtest.MustTokens("0..9")})
	admit("image", blocktable.Request{
		Prompt: kvtest.MustTokens("0..3,900*8,4..7"),
		MM:     []prefix.MMInput{{Hash: "img-a", Offset: 4, Length: 8}},
	})
	admit("old", blocktable.Request{Prompt: kvtest.MustTokens("500..511")})
	require.NoError(t, m.Finish(env.Seq("old")))
	require.Equal(t, 1, env.Index.Evict(1))
	_, err = m.PreemptSeq(env.Seq("image"), blocktable.Swap)
	require.NoError(t, err)
	env.FailAllocation(3)
	return env
}

// TestDumpGolden pins the text of Env.Dump; go test -run TestDumpGolden -kvtest.rewrite
// updates testdata/golden/state.txt.
func TestDumpGolden(t *testing.T) {
	env := goldenStack(t)
	kvtest.CheckGolden(t, "testdata/golden/state.txt", env.Dump())
	env.Heal()
	env.AbortAll()
}

// TestDumpIsDeterministic builds the same state twice: the dumps must be identical, and
// any further change must show in the text.
func TestDumpIsDeterministic(t *testing.T) {
	a, b := goldenStack(t), goldenStack(t)
	require.Equal(t, a.Dump(), b.Dump())
	_, err := b.Manager.Append(b.Seq("chat"), []int32{1}, 0)
	require.NoError(t, err)
	require.NotEqual(t, a.Dump(), b.Dump())
	for _, e := range []*kvtest.Env{a, b} {
		e.Heal()
		e.AbortAll()
	}
}

func TestCheckGoldenReportsADifference(t *testing.T) {
	fake := &fakeTB{}
	kvtest.CheckGolden(fake, "testdata/golden/state.txt", "something else\n")
	require.Len(t, fake.errors, 1)
	require.Contains(t, fake.errors[0], "-kvtest.rewrite")
	fake = &fakeTB{}
	kvtest.CheckGolden(fake, "testdata/golden/missing.txt", "")
	require.Len(t, fake.fatals, 1)
}
