package prefix

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kvpage/kvpage/evict"
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

// A device block whose key another entry holds (a 64-bit collision: same chained key,
// other tokens) cannot be tiered: HoldNeed does not count it and Hold leaves it, so that
// every block HoldNeed counted is held (before, it was counted and its copy silently
// refused, a hold that could not be met).
func TestHoldSkipsKeyCollision(t *testing.T) {
	x, admitP := holdIndex(t)
	p1 := Prompt{Tokens: toks(100, 9)}
	r1 := admitP(p1)
	h1, err := x.Hold(r1.ids[:2])
	require.NoError(t, err)
	r1.finish(t, x)
	completeAll(t, x, x.TakePlans(nil), true)
	require.NoError(t, x.ReleaseHold(h1))
	// The host's entries now name other tokens under the same keys.
	for e := range x.tiers.ents {
		if x.tiers.ents[e].live {
			x.tiers.entryTokens(int32(e), x.bs)[0] ^= 1 << 20
		}
	}
	r2 := admitP(p1) // cached on the device again, its entries not linked: they differ
	need, room := x.HoldNeed(r2.ids[:2])
	require.Equal(t, [2]int{0, 2}, [2]int{need, room}, "colliding blocks need no copy: none can be made")
	h2, err := x.Hold(r2.ids[:2])
	require.NoError(t, err)
	require.Zero(t, h2, "nothing to hold")
	require.Zero(t, x.PendingTransfers())
	r2.finish(t, x)
}

// brokenVictims is an LRU whose Victim finds nothing once broken, though it has
// candidates: a policy breaking its contract.
type brokenVictims struct {
	evict.Policy
	broken bool
}

func (p *brokenVictims) Victim() (int32, bool) {
	if p.broken {
		return 0, false
	}
	return p.Policy.Victim()
}

// Hold's copies cannot fail once HoldNeed counted them: if one does (here a tier policy
// that breaks its contract), it is a broken invariant, and Hold panics rather than
// return a hold of fewer blocks than it was given.
func TestHoldPanicsOnBrokenInvariant(t *testing.T) {
	var pol *brokenVictims
	pool, x := newTestIndex(t, 9, WithTiers(TierConfig{
		Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 2, Policy: func(n int, c evict.Clock) (evict.Policy, error) {
			lru, err := evict.NewLRU(n)
			pol = &brokenVictims{Policy: lru}
			return pol, err
		}}},
		BlockBytes: 1,
	}))
	r1 := admit(t, x, pool, Prompt{Tokens: toks(100, 9)})
	h1, err := x.Hold(r1.ids[:2])
	require.NoError(t, err)
	r1.finish(t, x)
	completeAll(t, x, x.TakePlans(nil), true)
	require.NoError(t, x.ReleaseHold(h1))
	r2 := admit(t, x, pool, Prompt{Tokens: toks(500, 9)})
	pol.broken = true
	require.PanicsWithValue(t, "kvpage: broken invariant: Hold could not copy block "+fmt.Sprint(r2.ids[0])+" that HoldNeed counted", func() {
		_, _ = x.Hold(r2.ids[:2])
	})
}

// A held entry whose load failed while another load still reads it is pending and
// leaving: it is being dropped, no copy into it is under way, so HoldInFlight does not
// count it (as a GroupTree's).
func TestHoldInFlightSkipsFailedLoad(t *testing.T) {
	pool, x := newTestIndex(t, 9, WithTiers(TierConfig{
		Tiers: []TierSpec{{Medium: MediumCPU, Capacity: 2}}, BlockBytes: 1,
	}))
	p := Prompt{Tokens: toks(100, 9)}
	r := admit(t, x, pool, p)
	h, err := x.Hold(r.ids[:2])
	require.NoError(t, err)
	r.finish(t, x)
	completeAll(t, x, x.TakePlans(nil), true)
	require.Zero(t, x.Stats().Cached, "the demoted blocks left the device")
	_, cur := x.Peek(nil, &p, LeaveOne)
	held, err := pool.Allocate(nil, 4)
	require.NoError(t, err)
	a, err := x.PrepareLoad(&p, cur, LeaveOne, held[:2])
	require.NoError(t, err)
	b, err := x.PrepareLoad(&p, cur, LeaveOne, held[2:])
	require.NoError(t, err)
	x.TakePlans(nil)
	_, err = x.CompleteTransfer(a, false)
	require.NoError(t, err)
	require.Zero(t, x.HoldInFlight(h), "a failed load's slots are leaving, not receiving a copy")
	_, err = x.CompleteTransfer(b, true)
	require.NoError(t, err)
	require.NoError(t, x.CheckInvariants())
}
