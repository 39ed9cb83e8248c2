package sim

import (
	"fmt"
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
		// Conversation 29's first turn, on system prompt 5: the eviction benchmark's first
		// request (bench.NewConvTrace) has these lengths too.
		"conversation": {ID: 0, Input: 1155, Output: 103, Group: 8 + 29, Shared: 1258, Base: 5, BaseShared: 1024},
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

// The conversation workload's shape: turns of one conversation grow by the previous reply
// and a new message, follow each other, keep one system prompt, and at most 48
// conversations are open at once.
func TestConversationWorkload(t *testing.T) {
	w, err := LookupWorkload("conversation")
	require.NoError(t, err)
	assert.Equal(t, convOpen, checkConversationShape(t, w.Generate(1500, 42)), "48 conversations open at once")
}

// ConversationWorkload(k) has the same shape with k conversations open: one at a time for
// k = 1, never more than k, and the built-in trace for k = 48.
func TestConversationWorkloadOpen(t *testing.T) {
	builtin, err := LookupWorkload("conversation")
	require.NoError(t, err)
	w48, err := ConversationWorkload(convOpen)
	require.NoError(t, err)
	require.Equal(t, builtin.Doc, w48.Doc)
	require.Equal(t, builtin.Generate(800, 7).Requests, w48.Generate(800, 7).Requests)
	for _, k := range []int{1, 7, 384} {
		w, err := ConversationWorkload(k)
		require.NoError(t, err)
		require.Contains(t, w.Doc, fmt.Sprintf("%d conversations open first", k))
		require.Contains(t, w.Doc, fmt.Sprintf("index next()%%%d ", k))
		maxOpen := checkConversationShape(t, w.Generate(3000, 42))
		require.LessOrEqual(t, maxOpen, k, "open %d", k)
		require.Greater(t, maxOpen, k/2, "open %d: most of them are running", k)
		if k == 1 {
			require.Equal(t, 1, maxOpen, "one conversation at a time")
		}
	}
	require.NotEqual(t, w48.Generate(400, 42).Requests, mustConversation(t, 96).Generate(400, 42).Requests)
	for _, k := range []int{0, -1, MaxOpenConversations + 1} {
		_, err := ConversationWorkload(k)
		require.ErrorIs(t, err, ErrInvalidConfig, "%d", k)
	}
}

func mustConversation(t *testing.T, open int) Workload {
	t.Helper()
	w, err := ConversationWorkload(open)
	require.NoError(t, err)
	return w
}

// checkConversationShape checks every request of a conversation trace and returns the
// most conversations that were open (begun and not yet at their last turn) at once.
func checkConversationShape(t *testing.T, tr *Trace) int {
	t.Helper()
	last := map[int]Request{}
	turns := map[int]int{}
	open := map[int]bool{}
	maxOpen := 0
	for i, r := range tr.Requests {
		require.Equal(t, i, r.ID)
		require.GreaterOrEqual(t, r.Group, convSystemPrompts, "conversation groups follow the system prompts")
		require.Less(t, r.Group, len(tr.Groups))
		require.GreaterOrEqual(t, r.Base, 0)
		require.Less(t, r.Base, convSystemPrompts)
		require.Equal(t, convSystemTokens, r.BaseShared)
		require.Equal(t, r.Input+r.Output, r.Shared, "the whole turn is the conversation's stream")
		require.GreaterOrEqual(t, r.Output, convReplyMin)
		require.LessOrEqual(t, r.Output, convReplyMax)
		prev, ok := last[r.Group]
		history := convSystemTokens
		if ok {
			history = prev.Input + prev.Output
			require.Equal(t, i-prev.ID, r.After, "turn %d follows its conversation's previous turn", i)
			require.Equal(t, prev.Base, r.Base, "one system prompt per conversation")
		} else {
			require.Zero(t, r.After, "a first turn follows nobody")
		}
		user := r.Input - history
		require.GreaterOrEqual(t, user, convUserMin, "request %d", i)
		require.LessOrEqual(t, user, convUserMax, "request %d", i)
		last[r.Group] = r
		turns[r.Group]++
		require.LessOrEqual(t, turns[r.Group], convTurnsMax)
		open[r.Group] = true
		maxOpen = max(maxOpen, len(open))
		if turns[r.Group] >= convTurnsMin && closes(tr, i) {
			delete(open, r.Group)
		}
	}
	assert.Greater(t, len(last), 200, "conversations close and new ones open")
	return maxOpen
}

// closes reports whether request i is its conversation's last in tr.
func closes(tr *Trace, i int) bool {
	for _, r := range tr.Requests[i+1:] {
		if r.Group == tr.Requests[i].Group {
			return false
		}
	}
	return true
}

// Turn k's prompt begins with turn k-1's prompt and output token for token, and every
// conversation on one system prompt begins with the same 1024 tokens, which no other
// system prompt's conversations share.
func TestConversationTurnsResendTheHistory(t *testing.T) {
	w, err := LookupWorkload("conversation")
	require.NoError(t, err)
	tr := w.Generate(400, 42)
	const seed = 42
	last := map[int]*Request{}
	bySystem := map[int]*Request{}
	followed := 0
	for i := range tr.Requests {
		r := &tr.Requests[i]
		if prev, ok := last[r.Group]; ok {
			for pos := range prev.Input + prev.Output {
				if Token(seed, prev, pos) != Token(seed, r, pos) {
					require.Failf(t, "turn does not resend its history", "request %d position %d", i, pos)
				}
			}
			require.NotEqual(t, Token(seed, r, r.Input+r.Output-1), Token(seed, &Request{ID: r.ID + 1, Group: -1}, 0),
				"the turn's own tokens are in its conversation's stream")
			followed++
		}
		last[r.Group] = r
		if other, ok := bySystem[r.Base]; ok && other.Group != r.Group {
			for pos := range convSystemTokens {
				if Token(seed, other, pos) != Token(seed, r, pos) {
					require.Failf(t, "system prompt not shared", "system prompt %d position %d", r.Base, pos)
				}
			}
			assert.NotEqual(t, Token(seed, other, convSystemTokens), Token(seed, r, convSystemTokens),
				"conversations part after the system prompt")
		}
		bySystem[r.Base] = r
	}
	require.Greater(t, followed, 100)
	for s, r := range bySystem {
		for s2, r2 := range bySystem {
			if s != s2 {
				assert.NotEqual(t, Token(seed, r, 0), Token(seed, r2, 0), "system prompts %d and %d differ", s, s2)
			}
		}
	}
}
