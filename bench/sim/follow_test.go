package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of the two request fields that multi-turn traces need: Base (a prefix wider than
// the group) and After (wait for an earlier request to finish).

func TestTokensBaseStreamPrecedesGroupStream(t *testing.T) {
	sys := &Request{ID: 0, Input: 6, Output: 1, Group: 2, Shared: 4}                           // a plain member of group 2
	turn := &Request{ID: 1, Input: 9, Output: 3, Group: 5, Shared: 12, Base: 2, BaseShared: 4} // group 5 under group 2
	other := &Request{ID: 2, Input: 9, Output: 3, Group: 5, Shared: 10}                        // group 5 without a base
	for pos := range 4 {
		assert.Equal(t, Token(42, sys, pos), Token(42, turn, pos), "position %d is the base group's", pos)
	}
	for pos := 4; pos < 10; pos++ {
		assert.Equal(t, Token(42, other, pos), Token(42, turn, pos), "position %d is the group's", pos)
	}
	differ := 0
	for pos := range 4 {
		if Token(42, other, pos) != Token(42, turn, pos) {
			differ++
		}
	}
	assert.Equal(t, 4, differ, "without the base, the group's own stream starts differently")
	assert.NotEqual(t, Token(42, turn, 11), Token(42, turn, 12), "past Shared the ids are private")
}

// Request 1 follows request 0: it arrives only when 0 has finished, and request 2, after it
// in the trace, waits too, although it follows nobody: the trace's order is kept.
func TestAfterWaitsForTheRequestFollowed(t *testing.T) {
	reqs := []Request{
		{ID: 0, Input: 2, Output: 5, Group: -1},
		{ID: 1, Input: 2, Output: 2, Group: -1, After: 1},
		{ID: 2, Input: 2, Output: 2, Group: -1},
	}
	for _, s := range allSchemes() {
		res, recs := runRecorded(t, reqs, tinyConfig(64, 16), s)
		// Request 0 runs steps 0-4 and finishes at the end of step 4; 1 and 2 arrive at
		// step 5 and run together for two steps.
		assert.Equal(t, 7, res.TotalSteps, s.Label())
		require.Len(t, recs, 7, s.Label())
		for i, want := range []int{1, 1, 1, 1, 1, 2, 2} {
			assert.Equal(t, want, recs[i].Running, "%s: running at step %d", s.Label(), i)
			assert.Zero(t, recs[i].Waiting, "%s: a request held for another is not waiting yet", s.Label())
		}
	}

	// Without After, all three run at once.
	reqs[1].After = 0
	res, err := simulate(reqs, tinyConfig(64, 16), Scheme{Name: OrcaOracle}, true)
	require.NoError(t, err)
	assert.Equal(t, 3, res.PeakRunning)
	assert.Equal(t, 5, res.TotalSteps)
}

func TestSimulateRejectsBadFollowAndBase(t *testing.T) {
	for name, r := range map[string]Request{
		"after beyond the first request": {ID: 0, Input: 2, Output: 2, Group: -1, After: 1},
		"negative after":                 {ID: 0, Input: 2, Output: 2, Group: -1, After: -1},
		"base beyond shared":             {ID: 0, Input: 2, Output: 2, Group: 0, Shared: 2, Base: 1, BaseShared: 3},
		"base without a group":           {ID: 0, Input: 2, Output: 2, Group: 0, Shared: 2, Base: -1, BaseShared: 1},
	} {
		_, err := Simulate([]Request{r}, tinyConfig(32, 16), Scheme{Name: OrcaOracle})
		assert.ErrorIs(t, err, ErrInvalidConfig, name)
	}
}

// Prepare renumbers what it keeps, so After is recomputed; a request that followed a
// rejected one follows nobody.
func TestPrepareRenumbersAfter(t *testing.T) {
	tr := &Trace{Requests: []Request{
		{ID: 0, Input: 3, Output: 2, Group: -1},
		{ID: 1, Input: 20, Output: 2, Group: -1},          // rejected
		{ID: 2, Input: 3, Output: 2, Group: -1, After: 1}, // followed the rejected one
		{ID: 3, Input: 3, Output: 2, Group: -1, After: 3}, // follows request 0
		{ID: 4, Input: 5, Output: 20, Group: 0, Shared: 25, // capped: shared and base cut too
			Base: 1, BaseShared: 20, After: 1},
	}}
	p := Prepare(tr, 15)
	assert.Equal(t, []Request{
		{ID: 0, Input: 3, Output: 2, Group: -1},
		{ID: 1, Input: 3, Output: 2, Group: -1},
		{ID: 2, Input: 3, Output: 2, Group: -1, After: 2},
		{ID: 3, Input: 5, Output: 10, Group: 0, Shared: 15, Base: 1, BaseShared: 15, After: 1},
	}, p.Requests)
	assert.Equal(t, 1, tr.Requests[2].After, "the trace itself is not modified")
}
