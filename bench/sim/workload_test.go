package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The generators are pinned: if a first request moves, every figure in bench/README.md
// moved with it.
func TestWorkloadCheckValues(t *testing.T) {
	first := map[string]Request{
		"sharegpt":  {ID: 0, Input: 236, Output: 131, Group: -1},
		"alpaca":    {ID: 0, Input: 26, Output: 41, Group: -1},
		"longchat":  {ID: 0, Input: 2511, Output: 444, Group: 0, Shared: 2955},
		"sysprompt": {ID: 0, Input: 989, Output: 895, Group: 0, Shared: 730},
	}
	for _, w := range Workloads {
		tr := w.Generate(5, 42)
		require.Len(t, tr.Requests, 5, w.Name)
		assert.Equal(t, first[w.Name], tr.Requests[0], w.Name)
		assert.Equal(t, tr, w.Generate(5, 42), "%s: same seed, same trace", w.Name)
		assert.NotEqual(t, tr.Requests, w.Generate(5, 43).Requests, "%s: another seed, another trace", w.Name)
	}
}

func TestWorkloadMeans(t *testing.T) {
	const n = 20000
	for _, tt := range []struct {
		name    string
		in, out float64
	}{{"sharegpt", shareGPTInputMean, shareGPTOutputMean}, {"alpaca", alpacaInputMean, alpacaOutputMean}} {
		w, err := LookupWorkload(tt.name)
		require.NoError(t, err)
		in, out := 0, 0
		for _, r := range w.Generate(n, 42).Requests {
			in += r.Input
			out += r.Output
		}
		assert.InEpsilon(t, tt.in, float64(in)/n, 0.03, "%s input mean", tt.name)
		assert.InEpsilon(t, tt.out, float64(out)/n, 0.03, "%s output mean", tt.name)
	}
}

func TestSharedPrefixWorkloads(t *testing.T) {
	sys, err := LookupWorkload("sysprompt")
	require.NoError(t, err)
	tr := sys.Generate(2000, 42)
	lens := map[int]int{}
	for _, r := range tr.Requests {
		require.GreaterOrEqual(t, r.Group, 0)
		require.Less(t, r.Group, sysPrompts)
		require.GreaterOrEqual(t, r.Shared, sysMinTokens)
		require.Less(t, r.Shared, sysMinTokens+sysSpread)
		require.Greater(t, r.Input, r.Shared, "the user message follows the system prompt")
		if l, ok := lens[r.Group]; ok {
			require.Equal(t, l, r.Shared, "one length per system prompt")
		}
		lens[r.Group] = r.Shared
	}

	chat, err := LookupWorkload("longchat")
	require.NoError(t, err)
	tr = chat.Generate(2000, 42)
	require.Len(t, tr.Requests, 2000)
	last := map[int]Request{}
	turn := 0
	for i, r := range tr.Requests {
		require.Equal(t, i, r.ID)
		require.Equal(t, r.Input+r.Output, r.Shared, "a whole turn is the conversation's stream")
		if prev, ok := last[r.Group]; ok {
			require.Greater(t, r.Input, prev.Input+prev.Output, "turn k+1's prompt holds turn k and a new message")
			turn++
		} else {
			require.Zero(t, turn, "every first turn comes before any later turn")
		}
		last[r.Group] = r
	}
	assert.Equal(t, len(tr.Groups), len(last))
}

func TestLookupWorkloadUnknown(t *testing.T) {
	_, err := LookupWorkload("shargpt")
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "sharegpt, alpaca, longchat, sysprompt")
}

func TestPoissonArrivals(t *testing.T) {
	w, err := LookupWorkload("alpaca")
	require.NoError(t, err)
	tr := w.Generate(4000, 42)
	WithPoissonArrivals(tr, 10, 42)
	for i := 1; i < len(tr.Requests); i++ {
		require.Greater(t, tr.Requests[i].Arrival, tr.Requests[i-1].Arrival)
	}
	assert.InEpsilon(t, 400, tr.Requests[len(tr.Requests)-1].Arrival, 0.05, "4,000 requests at 10/s take about 400 s")
	WithPoissonArrivals(tr, 0, 42)
	assert.Zero(t, tr.Requests[len(tr.Requests)-1].Arrival, "rate 0 means all at once")
}

func TestTokensSeparateRequestsAndShareGroups(t *testing.T) {
	a := &Request{ID: 1, Input: 8, Output: 4, Group: 3, Shared: 5}
	b := &Request{ID: 2, Input: 9, Output: 4, Group: 3, Shared: 5}
	c := &Request{ID: 3, Input: 9, Output: 4, Group: 4, Shared: 5}
	same, differ := 0, 0
	for pos := range 5 {
		assert.Equal(t, Token(42, a, pos), Token(42, b, pos), "shared positions are the group's")
		if Token(42, a, pos) == Token(42, c, pos) {
			same++
		} else {
			differ++
		}
	}
	assert.Greater(t, differ, same, "two groups have different streams")
	assert.NotEqual(t, Token(42, a, 5), Token(42, b, 5), "private positions differ between requests")
	assert.Equal(t, Token(42, a, 5), Token(42, a, 11), "a request's private id is its own")
	assert.Less(t, Token(42, a, 0), int32(groupTokenSpace))
}
