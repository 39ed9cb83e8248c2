package prefix

import (
	"math"
	"testing"

	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/evict"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Commit refuses a retention priority above evict.MaxPriority, in the prompt's Retention
// or in one of its ranges, and changes nothing; MaxPriority itself is taken.
func TestCommitRefusesPriorityAboveMax(t *testing.T) {
	cases := []struct {
		name string
		p    Prompt
		ok   bool
	}{
		{"max", Prompt{Retention: Retention{Priority: evict.MaxPriority}}, true},
		{"range at max", Prompt{RetentionRanges: []RetentionRange{{Start: 0, End: 4, Priority: evict.MaxPriority}}}, true},
		{"101", Prompt{Retention: Retention{Priority: evict.MaxPriority + 1}}, false},
		{"255", Prompt{Retention: Retention{Priority: 255}}, false},
		{"a range's 200", Prompt{RetentionRanges: []RetentionRange{{Start: 0, End: 4}, {Start: 4, End: 0, Priority: 200}}}, false},
		{"a negative start", Prompt{RetentionRanges: []RetentionRange{{Start: -1, End: 4, Priority: 50}}}, false},
		{"a negative end", Prompt{RetentionRanges: []RetentionRange{{Start: 0, End: -4, Priority: 50}}}, false},
		{"an end before the start", Prompt{RetentionRanges: []RetentionRange{{Start: 8, End: 4, Priority: 50}}}, false},
		{"an empty range", Prompt{RetentionRanges: []RetentionRange{{Start: 4, End: 4, Priority: 50}}}, false},
		{"the longest duration", Prompt{RetentionRanges: []RetentionRange{{Start: 0, Priority: 50, Duration: math.MaxUint64}}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool, x := newTestIndex(t, 8)
			p := tc.p
			p.Tokens = toks(1, 2*testBS)
			ids, cur := x.Peek(nil, &p, LeaveOne)
			require.Empty(t, ids)
			ids, err := pool.Allocate(nil, 2)
			require.NoError(t, err)
			before, cur0 := snap(x, pool), cur
			_, err = x.Commit(&cur, &p, ids)
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, 2, x.Stats().Cached)
				return
			}
			require.ErrorIs(t, err, ErrInvalidArgument)
			assert.Equal(t, before, snap(x, pool), "nothing changed")
			assert.Equal(t, cur0, cur, "the cursor is unmoved")
		})
	}
}

// The index's two setters of a retention after commit, SetRetention and HoldSession,
// apply the same rule as Commit: a priority above evict.MaxPriority is refused with
// ErrInvalidArgument, and nothing changes (no block's priority, no session's hold).
func TestSettersRefusePriorityAboveMax(t *testing.T) {
	cases := []struct {
		name string
		r    Retention
		ok   bool
	}{
		{"default", Retention{}, true},
		{"max", Retention{Priority: evict.MaxPriority, Until: 5}, true},
		{"101", Retention{Priority: evict.MaxPriority + 1}, false},
		{"255 with a limit", Retention{Priority: 255, Until: math.MaxUint64}, false},
	}
	setters := []struct {
		name string
		set  func(x *Index, ids []blocks.ID, r Retention) (int, error)
	}{
		{"SetRetention", func(x *Index, ids []blocks.ID, r Retention) (int, error) { return x.SetRetention(ids, r) }},
		{"HoldSession", func(x *Index, ids []blocks.ID, r Retention) (int, error) { return x.HoldSession(3, ids, r) }},
	}
	for _, st := range setters {
		for _, tc := range cases {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				pool, x := priorityIndex(t, 8)
				r := admit(t, x, pool, Prompt{Tokens: toks(1, 2*testBS), Retention: Retention{Priority: 20}})
				r.finish(t, x)
				_, err := x.HoldSession(3, r.ids[:1], Retention{Priority: 40, Until: 9})
				require.NoError(t, err)
				type state struct {
					s        snapshot
					prio     [2]uint8
					until    [2]uint64
					sessions int
					held     []blocks.ID
				}
				get := func() state {
					st := state{s: snap(x, pool), sessions: x.Sessions(), held: append([]blocks.ID(nil), x.ctl.sessions[3].ids...)}
					for i, id := range r.ids {
						st.prio[i], st.until[i] = prioOf(x, id)
					}
					return st
				}
				before := get()
				n, err := st.set(x, r.ids, tc.r)
				if tc.ok {
					require.NoError(t, err)
					require.Equal(t, 2, n)
					p, _ := prioOf(x, r.ids[1])
					require.Equal(t, tc.r.Priority, p)
					return
				}
				require.ErrorIs(t, err, ErrInvalidArgument)
				require.Zero(t, n)
				require.Equal(t, before, get(), "nothing changed")
				require.NoError(t, x.CheckInvariants())
			})
		}
	}
}

// A range's duration that would run past the end of the clock does not wrap to a time
// already passed (the block losing its priority at once): it lasts as long as the block is
// cached.
func TestRetentionRangeDurationDoesNotWrap(t *testing.T) {
	pool, x := priorityIndex(t, 8)
	x.clock.Tick()
	r := admit(t, x, pool, Prompt{Tokens: toks(1, testBS),
		RetentionRanges: []RetentionRange{{Start: 0, Priority: 90, Duration: math.MaxUint64}}})
	p, until := prioOf(x, r.ids[0])
	require.Equal(t, uint8(90), p)
	require.Zero(t, until, "no time limit, not one already past")
}
