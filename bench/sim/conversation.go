package sim

import (
	"fmt"

	"github.com/kvpage/kvpage/bench"
)

// Parameters of the conversation workload: those of the eviction benchmark's conversation
// trace (bench.ConvSystemPrompts and the rest, shared so that the two cannot drift apart).
const (
	convSystemPrompts          = bench.ConvSystemPrompts
	convSystemTokens           = bench.ConvSystemTokens
	convZipfS                  = bench.ConvZipfS
	convOpen                   = bench.ConvOpen
	convTurnsMin, convTurnsMax = bench.ConvTurnsMin, bench.ConvTurnsMax
	convUserMin, convUserMax   = bench.ConvUserMin, bench.ConvUserMax
	convReplyMin, convReplyMax = bench.ConvReplyMin, bench.ConvReplyMax
	// convMaxModelLen holds the longest possible turn, 1024 + 10 x (256 + 512) = 8,704
	// tokens, so that no turn is rejected or capped.
	convMaxModelLen = 16384
)

// MaxOpenConversations bounds ConversationWorkload's open conversations.
const MaxOpenConversations = 1 << 20

// ConversationWorkload returns the conversation workload with open conversations open at
// any time instead of the benchmark trace's 48 (bench.ConvOpen), so that a fleet can be
// given work in proportion to its size: at most open requests are ever outstanding, since
// a conversation's next turn waits for the previous one. The draws are the same with open
// in place of 48 (the built-in "conversation" is ConversationWorkload(48)). open must be
// in [1, MaxOpenConversations]; otherwise the error wraps ErrInvalidConfig.
func ConversationWorkload(open int) (Workload, error) {
	if open < 1 || open > MaxOpenConversations {
		return Workload{}, fmt.Errorf("%w: %d open conversations, want 1 to %d", ErrInvalidConfig, open, MaxOpenConversations)
	}
	return conversationWorkload(open), nil
}

// conversationWorkload is ConversationWorkload without the check.
func conversationWorkload(open int) Workload {
	return Workload{
		Name: "conversation",
		Doc: fmt.Sprintf("Multi-turn chat, the eviction benchmark's conversation trace (bench/eviction_conversation_test.go): "+
			"first 8 system prompts of 1024 tokens (1024 draws each, the benchmark's token ids, unused here). A "+
			"conversation opens by drawing its system prompt, a Zipf(s=1.1) choice among the 8 (bench.Zipf), then "+
			"its turns T = 2 + next()%%9 (2..10); %[1]d conversations open first. Then per request: the open "+
			"conversation at index next()%%%[1]d (in opening order), its user message U = 16 + next()%%241 tokens (then "+
			"U draws skipped), its reply R = 32 + next()%%481 tokens (then R draws skipped). A turn's prompt is the "+
			"system prompt, every earlier message and reply of its conversation, and its message: turn k's prompt "+
			"begins with turn k-1's prompt and reply. The system prompt is shared by every conversation that drew "+
			"it, the whole turn is the conversation's shared stream (group = conversation), and turn k arrives "+
			"only when turn k-1 has finished, no later request arriving before it (the trace's order is kept). A "+
			"conversation that has sent T turns closes and the next one opens at the end of the list.", open),
		MaxModelLen: convMaxModelLen,
		gen:         func(n int, seed uint64) *Trace { return genConversation(n, seed, open) },
	}
}

// genConversation is the conversation workload with numOpen conversations open. With
// numOpen = convOpen it makes the same draws, in the same order, as the benchmark's generator
// (bench.newConvTrace with seed 42 there), skipping the token ids it does not need, so
// that with seed 42 its requests have the benchmark trace's lengths, conversations and
// system prompts, up to the point where the benchmark stops opening conversations (after
// its 1,000th); this one keeps opening them until it has n requests.
func genConversation(n int, seed uint64, numOpen int) *Trace {
	r := bench.NewSplitMix64(seed)
	uniform := func(a, b int) int { return a + int(r.Next()%uint64(b-a+1)) }
	skip := func(k int) { // k token ids the benchmark draws and the simulator synthesises
		for range k {
			r.Next()
		}
	}
	t := newTrace(n)
	for i := range convSystemPrompts {
		skip(convSystemTokens)
		t.Groups = append(t.Groups, fmt.Sprintf("system-%d", i))
	}
	z := bench.NewZipf(convSystemPrompts, convZipfS)
	type conv struct {
		group, system, turns, sent int
		history                    int // tokens so far: system prompt, messages, replies
		last                       int // ID of the previous turn
	}
	open := func() *conv {
		c := &conv{group: len(t.Groups), system: z.Draw(r), history: convSystemTokens}
		c.turns = uniform(convTurnsMin, convTurnsMax)
		t.Groups = append(t.Groups, fmt.Sprintf("conversation-%d", c.group-convSystemPrompts))
		return c
	}
	active := make([]*conv, 0, numOpen)
	for range numOpen {
		active = append(active, open())
	}
	for len(t.Requests) < n {
		i := int(r.Next() % uint64(len(active)))
		c := active[i]
		user := uniform(convUserMin, convUserMax)
		skip(user)
		reply := uniform(convReplyMin, convReplyMax)
		skip(reply)
		id := len(t.Requests)
		req := Request{ID: id, Input: c.history + user, Output: reply, Group: c.group, Base: c.system, BaseShared: convSystemTokens}
		req.Shared = req.Input + req.Output
		if c.sent > 0 {
			req.After = id - c.last
		}
		t.Requests = append(t.Requests, req)
		c.history, c.last = req.Shared, id
		c.sent++
		if c.sent == c.turns {
			active = append(active[:i], active[i+1:]...)
			active = append(active, open())
		}
	}
	return t
}
