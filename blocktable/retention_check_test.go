package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A retention priority above evict.MaxPriority (101-255) is refused by Admit, CanAdmit
// and FinishTurn with the shared invalid-argument class, in a *SeqError, changing nothing;
// before, the policy took it silently as MaxPriority. 0 (the default) to MaxPriority are
// taken.
func TestRetentionPriorityAboveMaxIsRefused(t *testing.T) {
	for _, tc := range []struct {
		prio uint8
		ok   bool
	}{{0, true}, {1, true}, {evict.MaxPriority, true}, {evict.MaxPriority + 1, false}, {255, false}} {
		s := newStack(t, 16, 4, Config{})
		_, err := s.m.Admit(1, &Request{Prompt: seqOf(9, 0), MaxTokens: 12})
		require.NoError(t, err)
		r := prefix.Retention{Priority: tc.prio}
		req := &Request{Prompt: seqOf(9, 50), MaxTokens: 12, Retention: r}

		before := s.m.Stats()
		idx := s.idx.Stats()
		_, cerr := s.m.CanAdmit(2, req)
		_, aerr := s.m.Admit(2, req)
		_, ferr := s.m.FinishTurn(1, 7, r)
		if tc.ok {
			require.NoError(t, cerr, "priority %d", tc.prio)
			require.NoError(t, aerr, "priority %d", tc.prio)
			require.NoError(t, ferr, "priority %d", tc.prio)
			s.done(t)
			continue
		}
		for name, err := range map[string]error{"can admit": cerr, "admit": aerr, "finish turn": ferr} {
			require.ErrorIs(t, err, ErrInvalidArgument, "%s, priority %d", name, tc.prio)
			require.ErrorIs(t, err, prefix.ErrInvalidArgument, "%s: the shared class", name)
			var se *SeqError
			require.ErrorAs(t, err, &se, name)
			require.Contains(t, err.Error(), "retention priority")
		}
		require.Equal(t, before, s.m.Stats(), "priority %d changed the Manager", tc.prio)
		require.Equal(t, idx, s.idx.Stats(), "priority %d changed the index", tc.prio)
		require.True(t, s.m.Contains(1), "FinishTurn refused: seq 1 still runs")
		require.False(t, s.m.Contains(2))
		require.Zero(t, s.idx.Sessions(), "no session held")
		s.done(t)
	}
}
