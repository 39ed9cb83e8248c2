package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/internal/invariant"
	"github.com/stretchr/testify/require"
)

// The spare records used to keep a record, with its token and table buffers, for the
// most sequences ever alive at once, for as long as the Manager lived. They now keep at
// most one more than the Manager has sequences: a burst leaves one record behind once
// its sequences are gone.
func TestSpareRecordsAreBounded(t *testing.T) {
	const n = 8
	s := newStack(t, 64, 4, Config{})
	req := &Request{Prompt: seqOf(6, 100), MaxTokens: 40}
	for id := SeqID(1); id <= n; id++ {
		_, err := s.m.Admit(id, req)
		require.NoError(t, err)
	}
	for id := SeqID(1); id <= n; id++ {
		require.NoError(t, s.m.Finish(id))
		require.LessOrEqual(t, len(s.m.spare), int(n-id)+1, "after seq %d", id)
		require.NoError(t, s.m.CheckInvariants())
	}
	require.Len(t, s.m.spare, 1, "one record kept for the next admission")
	s.done(t)
}

// Records taken from the spare list leave no pointer to them in its array, which would
// keep a record alive, buffers and all, after the list trims it.
func TestSpareListKeepsNoStaleRecords(t *testing.T) {
	s := newStack(t, 64, 4, Config{})
	req := &Request{Prompt: seqOf(6, 100), MaxTokens: 40}
	for id := SeqID(1); id <= 5; id++ {
		_, err := s.m.Admit(id, req)
		require.NoError(t, err)
	}
	for id := SeqID(3); id <= 5; id++ {
		require.NoError(t, s.m.Finish(id)) // two sequences left: three records kept
	}
	require.Len(t, s.m.spare, 3)
	for id := SeqID(6); id <= 7; id++ {
		_, err := s.m.Admit(id, req)
		require.NoError(t, err)
	}
	require.Len(t, s.m.spare, 1)
	for i, r := range s.m.spare[:cap(s.m.spare)] {
		if i >= len(s.m.spare) {
			require.Nil(t, r, "slot %d of the list's array names a record in use", i)
		}
	}
	s.done(t)
}

// A batch that turns over, one sequence finished and another admitted in its place, and a
// server that runs one sequence at a time, still reuse a record each admission.
func TestSpareRecordsServeTurnover(t *testing.T) {
	if invariant.Enabled {
		t.Skip("invariant checks allocate")
	}
	for _, batch := range []int{1, 4} {
		s := newStack(t, 64, 4, Config{})
		req := &Request{Prompt: seqOf(6, 100), MaxTokens: 40}
		next := SeqID(1)
		for range batch {
			_, err := s.m.Admit(next, req)
			require.NoError(t, err)
			next++
		}
		turn := func() {
			if err := s.m.Finish(next - SeqID(batch)); err != nil {
				panic(err)
			}
			if _, err := s.m.Admit(next, req); err != nil {
				panic(err)
			}
			next++
		}
		turn()
		require.Zero(t, testing.AllocsPerRun(200, turn), "batch of %d", batch)
		s.done(t)
	}
}
