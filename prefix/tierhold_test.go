package prefix

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// holdIndex has one lower tier of two slots, which evicts by dropping.
func holdIndex(t *testing.T) (*Index, func(p Prompt) *request) {
	t.Helper()
	pool, x := newTestIndex(t, 9, WithTiers(TierConfig{
		Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 2}}, BlockBytes: 1,
	}))
	return x, func(p Prompt) *request { return admit(t, x, pool, p) }
}

func dumpOf(t *testing.T, x *Index) string {
	var b strings.Builder
	require.NoError(t, x.WriteState(&b))
	s := b.String()
	for _, k := range []Tier{1} {
		st := x.TierStatsOf(k)
		s += strings.Repeat("|", st.Resident) + strings.Repeat(".", st.Pending)
	}
	return s
}

// A held prefix stays in the host tier while a later one cannot take its slots: the
// later Hold is refused with the exact counts and changes nothing; once released, the
// held blocks are candidates again and the later Hold evicts them.
func TestHoldKeepsLowerTierBlocks(t *testing.T) {
	x, admitP := holdIndex(t)
	p1 := Prompt{Tokens: toks(100, 9)} // 2 full blocks and a partial one
	r1 := admitP(p1)
	need, room := x.HoldNeed(r1.ids[:2])
	require.Equal(t, [2]int{2, 2}, [2]int{need, room})
	h1, err := x.Hold(r1.ids[:2])
	require.NoError(t, err)
	require.Equal(t, 2, x.HeldBlocks(h1), "pending copies are held too")
	r1.finish(t, x)
	completeAll(t, x, x.TakePlans(nil), true)
	require.Equal(t, 2, x.TierStatsOf(1).Resident)
	require.Zero(t, x.Stats().Cached, "the demoted blocks left the device")
	require.Equal(t, 2, x.HeldBlocks(h1))

	r2 := admitP(Prompt{Tokens: toks(500, 9)})
	need, room = x.HoldNeed(r2.ids[:2])
	require.Equal(t, [2]int{2, 0}, [2]int{need, room}, "held slots are no candidates")
	before := dumpOf(t, x)
	_, err = x.Hold(r2.ids[:2])
	var full *TierFullError
	require.ErrorAs(t, err, &full)
	require.True(t, errors.Is(err, ErrTierFull))
	require.Equal(t, TierFullError{Requested: 2, Available: 0}, *full)
	require.Equal(t, before, dumpOf(t, x), "a refused Hold changed the state")

	// Listing a block twice counts it once; a block some tier holds needs no copy.
	require.NoError(t, x.ReleaseHold(h1))
	require.ErrorIs(t, x.ReleaseHold(h1), ErrUnknownHold)
	require.Equal(t, 2, x.PeekLower(&p1, Cursor{}, LeaveOne, 0).Lower, "released, still resident")
	need, room = x.HoldNeed(append(append(r2.ids[:1:1], r2.ids[0]), r2.ids[1]))
	require.Equal(t, [2]int{2, 2}, [2]int{need, room})
	h2, err := x.Hold(r2.ids[:2])
	require.NoError(t, err)
	require.Zero(t, x.PeekLower(&p1, Cursor{}, LeaveOne, 0).Lower, "the released prefix was evicted for the new hold")
	r2.finish(t, x)

	// A failed copy drops the hold on that block: HeldBlocks says so, and the release still
	// works.
	completeAll(t, x, x.TakePlans(nil), false)
	require.Zero(t, x.HeldBlocks(h2))
	require.NoError(t, x.ReleaseHold(h2))
	require.NoError(t, x.ReleaseHold(0))
	require.NoError(t, x.CheckInvariants())
}
