package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
)

// A session's context survives the pause between turns against newer default traffic
// under the priority policy; released, it is evicted first.
func TestFinishTurnKeepsTheSessionThroughThePause(t *testing.T) {
	pool := newPool(t, 9)
	clock := &evict.Counter{}
	idx, err := prefix.New(pool, 4, prefix.WithClock(clock), prefix.WithPolicy(evict.NewPriority))
	require.NoError(t, err)
	m, err := New(Config{Pool: pool, Index: idx})
	require.NoError(t, err)

	turn1 := seqOf(9, 1)
	_, err = m.Admit(1, &Request{Prompt: turn1})
	require.NoError(t, err)
	_, err = m.Append(1, seqOf(3, 50), 0) // the answer: 12 tokens, 3 full blocks
	require.NoError(t, err)
	held, err := m.FinishTurn(1, 42, prefix.Retention{Priority: prefix.SessionPriority, Until: clock.Now() + 1000})
	require.NoError(t, err)
	require.Equal(t, 3, held)

	// Another user's request needs 6 blocks of 8: the session's 3 must stay.
	_, err = m.Admit(2, &Request{Prompt: seqOf(20, 500)})
	require.NoError(t, err)
	require.NoError(t, m.Finish(2))
	_, err = m.Admit(3, &Request{Prompt: seqOf(20, 900)})
	require.NoError(t, err)

	turn2 := append(append(append([]int32(nil), turn1...), seqOf(3, 50)...), seqOf(5, 70)...)
	require.NoError(t, m.Finish(3))
	res, err := m.CanAdmit(4, &Request{Prompt: turn2})
	require.NoError(t, err)
	require.Equal(t, 12, res.HitTokens, "the next turn hits the whole context")

	require.True(t, m.ReleaseSession(42))
	require.False(t, m.ReleaseSession(42))
	require.Equal(t, 3, idx.Evict(3), "released: the session's blocks (default priority, oldest) go first")
	res, err = m.CanAdmit(4, &Request{Prompt: turn2})
	require.NoError(t, err)
	require.Zero(t, res.HitTokens)
	require.NoError(t, m.CheckInvariants())
}
