package blocktable

import (
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// unordered hides a policy's OrderedPreemption methods, so that the Manager describes
// every candidate and asks Victims, as it does for a policy whose order reads Freeable.
type unordered struct{ evict.Preemption }

// An ordered policy's Preempt (walking the kept order) chooses exactly the victims, and
// fails exactly when, the general path does with the same policy's Victims: random
// admissions with shared prefixes, forks, decode steps, truncations, finishes, swaps and
// preemptions run on two Managers in lockstep, and every result must agree.
func TestPreemptOrderedMatchesGeneral(t *testing.T) {
	for _, name := range []string{"fcfs", "priority", "progress"} {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				p, err := evict.PreemptionByName(name)
				require.NoError(rt, err)
				a, b := newLockstep(rt, p), newLockstep(rt, unordered{p})
				require.NotNil(rt, a.ordered)
				require.Nil(rt, b.ordered)
				runLockstep(rt, a, b, nil)
			})
		})
	}
}

// The cost policy's Freeable counted without a walk (freeable.go) gives exactly the
// victims, and the failures, of Freeable planned per candidate: the same random operations
// (duplicate commits that tangle a path included: prompts of 1-13 tokens from three
// bases, blocks of 4) on a Manager that may take the shortcut and one that never does.
func TestPreemptCostSoleMatchesPlanned(t *testing.T) {
	sole, tangled := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		a, b := newLockstep(rt, evict.NewCostPreemption()), newLockstep(rt, evict.NewCostPreemption())
		b.walkFreeable = true
		runLockstep(rt, a, b, func() {
			if a.soleFreeable() {
				sole++
			} else {
				tangled++
			}
		})
	})
	t.Logf("preemptions with Freeable by binary search: %d, planned (tangled): %d", sole, tangled)
	require.NotZero(t, sole)
}

// runLockstep drives a and b through the same random operations and requires every result
// to agree; onPreempt, if set, runs before each preemption.
func runLockstep(rt *rapid.T, a, b *Manager, onPreempt func()) {
	next := SeqID(1)
	for range rapid.IntRange(1, 80).Draw(rt, "ops") {
		kind := rapid.IntRange(0, 7).Draw(rt, "kind")
		x := rapid.IntRange(0, 1000).Draw(rt, "x")
		ids := a.Seqs(nil)
		pick := func() SeqID { return ids[x%len(ids)] }
		switch {
		case kind <= 1: // admit, often sharing a prefix
			n := 1 + x%13
			req := &Request{Prompt: seqOf(n, int32(1+x%3)), Priority: x % 3}
			ra, ea := a.Admit(next, req)
			rb, eb := b.Admit(next, req)
			require.Equal(rt, ea, eb)
			require.Equal(rt, ra, rb)
			next++
		case len(ids) == 0:
		case kind == 2: // decode steps
			id := pick()
			for range 1 + x%5 {
				ra, ea := a.Append(id, []int32{int32(x)}, 0)
				rb, eb := b.Append(id, []int32{int32(x)}, 0)
				require.Equal(rt, ea, eb)
				require.Equal(rt, ra, rb)
			}
		case kind == 3:
			require.Equal(rt, a.Fork(pick(), next), b.Fork(pick(), next))
			next++
		case kind == 4:
			id := pick()
			n := 0
			if info, err := a.Blocks(id); err == nil && len(info) > 0 {
				n = x % (len(info)*4 + 1)
			}
			require.Equal(rt, a.Truncate(id, n), b.Truncate(id, n))
		case kind == 5:
			id := pick()
			require.Equal(rt, a.Finish(id), b.Finish(id))
		case kind == 6:
			id := pick()
			pa, ea := a.Resume(id)
			pb, eb := b.Resume(id)
			require.Equal(rt, ea, eb)
			require.Equal(rt, pa, pb)
			if x%2 == 0 { // and complete the transfers in flight
				pa, pb := a.TakePlans(nil), b.TakePlans(nil)
				require.Equal(rt, pa, pb)
				for i, p := range pa {
					if i > 0 && pa[i-1].ID == p.ID {
						continue // one transfer, several source tiers
					}
					da, ea := a.CompleteTransfer(p.ID, true)
					db, eb := b.CompleteTransfer(p.ID, true)
					require.Equal(rt, ea, eb)
					require.Equal(rt, da, db)
				}
			}
		default:
			req := PreemptRequest{Need: 1 + x%9, Mode: PreemptMode(x % 2)}
			if x%3 == 0 {
				req.Protect = []SeqID{pick()}
			}
			if onPreempt != nil {
				onPreempt()
			}
			pa, ea := a.Preempt(req, nil)
			pb, eb := b.Preempt(req, nil)
			require.Equal(rt, ea, eb)
			require.Equal(rt, pa, pb)
		}
		require.NoError(rt, a.CheckInvariants())
	}
}

func newLockstep(t require.TestingT, p evict.Preemption) *Manager {
	pool, err := blocks.New(24, blocks.WithNullBlock())
	require.NoError(t, err)
	clock := &evict.Counter{}
	idx, err := prefix.New(pool, 4, prefix.WithClock(clock), prefix.WithTiers(prefix.TierConfig{
		Tiers: []prefix.TierSpec{{Medium: prefix.MediumCPU, Capacity: 16}}, BlockBytes: 1,
	}))
	require.NoError(t, err)
	m, err := New(Config{Pool: pool, Index: idx, BlockSize: 4, Clock: clock, Preemption: p})
	require.NoError(t, err)
	return m
}
