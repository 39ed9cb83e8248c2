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

// genConversation is the conversation workload. It makes the same draws, in the same
// order, as the benchmark's generator (bench.newConvTrace with seed 42 there), skipping
// the token ids it does not need, so that with seed 42 its requests have the benchmark
// trace's lengths, conversations and system prompts, up to the point where the benchmark
// stops opening conversations (after its 1,000th); this one keeps opening them until it
// has n requests.
func genConversation(n int, seed uint64) *Trace {
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
	active := make([]*conv, 0, convOpen)
	for range convOpen {
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
