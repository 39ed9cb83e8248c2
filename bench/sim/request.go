package sim

// Request is one request of a trace: what arrives, how long its prompt is, how many tokens
// it generates, and which leading tokens it shares with other requests.
type Request struct {
	// ID numbers the request in trace order, from 0. It also fixes the request's own
	// synthetic token ids (see Token).
	ID int
	// Arrival is the arrival time in seconds from the start of the trace; Config's
	// StepDuration maps it to a scheduler step.
	Arrival float64
	// Input is the prompt length in tokens (at least 1).
	Input int
	// Output is the number of tokens the request generates (at least 1).
	Output int
	// Group is the prefix group, an index into Trace.Groups, or -1 for none.
	Group int
	// Shared is how many leading tokens of the request (prompt first, then output) are the
	// group's token stream, identical in every request of the group: a system prompt, or a
	// conversation's history. 0 when Group is -1; at most Input+Output.
	Shared int
	// BaseShared, when positive, says that the first BaseShared of the Shared tokens are
	// group Base's stream rather than Group's: a prefix wider than the group, such as the
	// system prompt that many conversations (each its own group) begin with. 0 when
	// unused (Base is then ignored); at most Shared.
	Base, BaseShared int
	// After, when positive, makes the request wait for an earlier one: it joins the
	// waiting queue only once request ID-After has finished (and its own arrival time has
	// come), as a conversation's next turn waits for the reply to the previous one. 0 for
	// none; at most ID.
	After int
}

// KVLen is the number of token states the request holds when it finishes: its prompt and
// every output token but the last, which is returned to the user and never fed back.
func (r *Request) KVLen() int { return r.Input + r.Output - 1 }

// Trace is a list of requests in arrival order (ties in file order), with the names of
// their prefix groups.
type Trace struct {
	// Requests in arrival order; Requests[i].ID == i.
	Requests []Request
	// Groups names the prefix groups; Request.Group indexes it.
	Groups []string
	// Skipped counts source records left out, by reason (ShareGPT conversations without
	// a prompt and a reply). Every skip is reported here and in the simulator's output.
	Skipped map[string]int
}

// groupTokenSpace bounds the token ids of shared streams; a request's own tokens lie above
// it, so a request's own tokens never equal a shared token.
const groupTokenSpace = 128000

// Token returns the synthetic token id at position pos of request r (prompt positions
// first, then output positions). The simulator needs ids only so that the prefix index can
// tell shared blocks from private ones:
//   - the first r.Shared positions take the group's stream: a pseudo-random id in
//     [0, 128000) that depends only on (seed, group, pos), the same in every member;
//     the first r.BaseShared of them take group r.Base's stream instead;
//   - every other position takes the id 128000 + r.ID, so no two requests ever share a
//     private block, while a preempted request re-hits its own blocks when readmitted.
func Token(seed uint64, r *Request, pos int) int32 {
	if pos < r.BaseShared {
		return groupToken(seed, r.Base, pos)
	}
	if pos < r.Shared {
		return groupToken(seed, r.Group, pos)
	}
	return int32(groupTokenSpace + r.ID%(1<<31-groupTokenSpace))
}

// groupToken is position pos of group g's token stream.
func groupToken(seed uint64, g, pos int) int32 {
	return int32(mix(seed^uint64(g+1)<<32^uint64(pos)) % groupTokenSpace)
}

// mix is SplitMix64's finaliser: a bijective hash of a 64-bit word.
func mix(z uint64) uint64 {
	z += 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}
