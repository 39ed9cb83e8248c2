package bench

// The multi-turn conversation trace of the eviction-policy comparison. Every turn of a
// conversation resends the whole history (system prompt, every earlier user message and
// reply) plus a new user message, so a turn hits the previous turn's cached blocks if the
// cache kept them while other conversations ran. That reuse distance, set by how many
// conversations are open at once, is what separates eviction policies here; W3 (one-shot
// requests on shared system prompts) separates them on popularity instead.

// ConvRequest is one turn of a conversation: its prompt (the whole history plus the new
// user message) and the reply, appended token by token as decode output. The next turn's
// prompt starts with Prompt followed by Output.
type ConvRequest struct {
	Conv, Turn int
	Prompt     []int32
	Output     []int32
}

// ConvTrace is the whole conversation trace, generated before timing.
type ConvTrace struct {
	System   [][]int32
	Requests []ConvRequest
}

// PromptTokens is the sum of the prompt lengths (the hit rate's denominator).
func (t *ConvTrace) PromptTokens() int {
	n := 0
	for i := range t.Requests {
		n += len(t.Requests[i].Prompt)
	}
	return n
}

// NewConvTrace generates the conversation trace. Exactly, from NewSplitMix64(Seed):
//
//  1. ConvSystemPrompts system prompts of ConvSystemTokens Token() values each, in order.
//  2. Conversations open in order 0, 1, 2, ...; opening one draws its system prompt
//     (NewZipf(ConvSystemPrompts, ConvZipfS).Draw) then its number of turns
//     (uniform(ConvTurnsMin, ConvTurnsMax)), where uniform(a, b) = a + Next() % (b−a+1).
//     Its history starts as a copy of its system prompt.
//  3. The first ConvOpen conversations open. Then, until every conversation is done: pick
//     the open conversation at index Next() % open (open conversations are kept in the
//     order they opened); draw its user message, uniform(ConvUserMin, ConvUserMax) Token()
//     values, append it to the history, and the prompt is the history so far; draw the
//     reply, uniform(ConvReplyMin, ConvReplyMax) Token() values, append it to the history;
//     emit the request. A conversation that has sent all its turns closes (leaves the
//     open list, keeping the order of the others) and the next conversation, if any
//     remains, opens at the end of the list.
//
// Requests run one after another in the order emitted, each exactly as a W3 request:
// admit the prompt (prefix hit plus allocation), append the reply one token at a time,
// finish (commit every full block, release).
func NewConvTrace() *ConvTrace { return newConvTrace(ConvConversations, ConvOpen) }

// newConvTrace generates a conversation trace with the given number of conversations, open
// at most open at a time (NewConvTrace's rules otherwise), for tests that need a small one.
func newConvTrace(conversations, open int) *ConvTrace {
	r := NewSplitMix64(Seed)
	uniform := func(a, b int) int { return a + int(r.Next()%uint64(b-a+1)) }
	t := &ConvTrace{System: make([][]int32, ConvSystemPrompts)}
	for i := range t.System {
		t.System[i] = make([]int32, ConvSystemTokens)
		for j := range t.System[i] {
			t.System[i][j] = r.Token()
		}
	}
	z := NewZipf(ConvSystemPrompts, ConvZipfS)
	type conv struct {
		id, turns, sent int
		history         []int32
	}
	next := 0
	openNext := func() *conv {
		c := &conv{id: next}
		next++
		sys := t.System[z.Draw(r)]
		c.turns = uniform(ConvTurnsMin, ConvTurnsMax)
		c.history = append(make([]int32, 0, 8192), sys...)
		return c
	}
	var active []*conv
	for range min(open, conversations) {
		active = append(active, openNext())
	}
	for len(active) > 0 {
		i := int(r.Next() % uint64(len(active)))
		c := active[i]
		for range uniform(ConvUserMin, ConvUserMax) {
			c.history = append(c.history, r.Token())
		}
		prompt := len(c.history)
		for range uniform(ConvReplyMin, ConvReplyMax) {
			c.history = append(c.history, r.Token())
		}
		// Full slice expressions: a later append to the history never writes into them.
		h := c.history
		t.Requests = append(t.Requests, ConvRequest{Conv: c.id, Turn: c.sent,
			Prompt: h[:prompt:prompt], Output: h[prompt:len(h):len(h)]})
		c.sent++
		if c.sent == c.turns {
			active = append(active[:i], active[i+1:]...)
			if next < conversations {
				active = append(active, openNext())
			}
		}
	}
	return t
}
