package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A weight update while requests run: their blocks are unreachable at once, they commit
// nothing more, and a request after the bump computes its prompt afresh and caches it.
func TestManagerBumpEpochWhileRunning(t *testing.T) {
	s := newStack(t, 32, 4, Config{})
	ns := prefix.Namespace{LoRA: "a"}
	_, err := s.m.Admit(1, &Request{Namespace: ns, Prompt: seqOf(10, 1)})
	require.NoError(t, err)
	_, err = s.m.Admit(2, &Request{Prompt: seqOf(10, 1)}) // another namespace
	require.NoError(t, err)

	require.Equal(t, uint32(1), s.m.BumpEpoch(ns))
	res, err := s.m.CanAdmit(3, &Request{Namespace: ns, Prompt: seqOf(10, 1)})
	require.NoError(t, err)
	require.Zero(t, res.HitTokens, "old weights' blocks are unreachable while seq 1 still runs")
	res, err = s.m.CanAdmit(3, &Request{Prompt: seqOf(10, 1)})
	require.NoError(t, err)
	require.Equal(t, 8, res.HitTokens, "other namespaces are untouched")

	cached := s.idx.Stats().Cached
	_, err = s.m.Append(1, seqOf(6, 50), 0) // fills blocks 2 and 3 of seq 1
	require.NoError(t, err)
	require.Equal(t, cached, s.idx.Stats().Cached, "the stale sequence commits nothing")
	require.NoError(t, s.m.Finish(1))

	res, err = s.m.Admit(3, &Request{Namespace: ns, Prompt: seqOf(10, 1)})
	require.NoError(t, err)
	require.Zero(t, res.HitTokens)
	require.NoError(t, s.m.Finish(3))
	res, err = s.m.CanAdmit(4, &Request{Namespace: ns, Prompt: seqOf(10, 1)})
	require.NoError(t, err)
	require.Equal(t, 8, res.HitTokens, "the new epoch's blocks are shared again")
	s.done(t)
}
