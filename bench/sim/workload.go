package sim

import (
	"fmt"
	"math"
	"strings"

	"github.com/kvpage/kvpage/bench"
)

// Workload is a built-in seeded request generator. Its Doc states the distributions
// exactly; the same (n, seed) always gives the same trace.
type Workload struct {
	// Name is what --workload takes.
	Name string
	// Doc defines the distributions exactly (printed by --help).
	Doc string
	// MaxModelLen is the max-model-len the workload is meant for, used when the caller
	// sets none.
	MaxModelLen int
	gen         func(n int, seed uint64) *Trace
}

// Generate returns the workload's first n requests for seed, all arriving at time 0 (see
// WithPoissonArrivals).
func (w Workload) Generate(n int, seed uint64) *Trace { return w.gen(n, seed) }

// Means of the two datasets' request lengths, as the PagedAttention paper reports them
// (Figure 11): ShareGPT 161.31 input and 337.99 output tokens, Alpaca 19.31 and 58.45. The
// shapes (lognormal, sigma) are this simulator's assumption, not fitted to the datasets.
const (
	shareGPTInputMean  = 161.31
	shareGPTOutputMean = 337.99
	shareGPTSigma      = 1.0
	alpacaInputMean    = 19.31
	alpacaOutputMean   = 58.45
	alpacaSigma        = 0.5
)

// Workloads lists the built-in workloads.
var Workloads = []Workload{
	{
		Name: "sharegpt",
		Doc: "ShareGPT-like chat: input ~ LN(mean 161.31, sigma 1.0), output ~ LN(mean 337.99, sigma 1.0); " +
			"no shared prefixes. Per request: input (2 draws), then output (2 draws).",
		MaxModelLen: 2048,
		gen:         independentLengths(shareGPTInputMean, shareGPTOutputMean, shareGPTSigma),
	},
	{
		Name: "alpaca",
		Doc: "Alpaca-like instructions: input ~ LN(mean 19.31, sigma 0.5), output ~ LN(mean 58.45, sigma 0.5); " +
			"no shared prefixes. Per request: input (2 draws), then output (2 draws).",
		MaxModelLen: 2048,
		gen:         independentLengths(alpacaInputMean, alpacaOutputMean, alpacaSigma),
	},
	{
		Name: "longchat",
		Doc: "Long-context chat: conversations of T = 2 + next()%5 turns (2..6); turn 1's user message is a " +
			"document ~ LN(mean 3000, sigma 0.5), later user messages ~ LN(mean 100, sigma 1.0), each reply ~ " +
			"LN(mean 300, sigma 1.0); per conversation: T, then per turn the user message and the reply. Turn k's " +
			"prompt is the whole history (every earlier message and reply) plus its message, and the whole turn " +
			"is the conversation's shared stream (group = conversation). Requests are ordered by turn, then by " +
			"conversation, so every first turn comes before any second turn; conversations are generated until " +
			"there are n requests.",
		MaxModelLen: 16384,
		gen:         genLongChat,
	},
	{
		Name: "sysprompt",
		Doc: "Shared system prompts: 16 system prompts of 200 + next()%601 tokens (200..800), drawn first; then per " +
			"request a Zipf(s=1.1) choice among them (bench.Zipf), a user message ~ LN(mean 161.31, sigma 1.0) and " +
			"an output ~ LN(mean 337.99, sigma 1.0). Input = system prompt + user message; the system prompt is " +
			"shared (group = its index).",
		MaxModelLen: 2048,
		gen:         genSysPrompt,
	},
	conversationWorkload(convOpen),
}

// LookupWorkload returns the built-in workload called name.
func LookupWorkload(name string) (Workload, error) {
	for _, w := range Workloads {
		if w.Name == name {
			return w, nil
		}
	}
	names := make([]string, len(Workloads))
	for i, w := range Workloads {
		names[i] = w.Name
	}
	return Workload{}, fmt.Errorf("%w: unknown workload %q (built-in: %s)", ErrInvalidConfig, name, strings.Join(names, ", "))
}

func newTrace(n int) *Trace { return &Trace{Requests: make([]Request, 0, n)} }

// independentLengths generates requests without shared prefixes whose input and output
// lengths are drawn, in that order, from lognormals with the given means and sigma.
func independentLengths(inMean, outMean, sigma float64) func(n int, seed uint64) *Trace {
	return func(n int, seed uint64) *Trace {
		r := bench.NewSplitMix64(seed)
		t := newTrace(n)
		for i := range n {
			in := lognormal(r, inMean, sigma)
			out := lognormal(r, outMean, sigma)
			t.Requests = append(t.Requests, Request{ID: i, Input: in, Output: out, Group: -1})
		}
		return t
	}
}

// lognormal draws a length from a lognormal distribution with the given mean and sigma
// (mu = ln(mean) - sigma^2/2), rounded to the nearest integer, at least 1. It takes two
// draws: u1 = 1 - Unit() in (0, 1] and u2 = Unit(), turned into one standard normal
// variate by Box-Muller, z = sqrt(-2 ln u1) cos(2 pi u2).
func lognormal(r *bench.SplitMix64, mean, sigma float64) int {
	u1 := 1 - r.Unit()
	u2 := r.Unit()
	z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
	x := math.Exp(math.Log(mean) - sigma*sigma/2 + sigma*z)
	if x > 1<<30 {
		x = 1 << 30
	}
	return max(1, int(math.Round(x)))
}

func genLongChat(n int, seed uint64) *Trace {
	r := bench.NewSplitMix64(seed)
	type turn struct{ msg, reply int }
	var convs [][]turn
	total := 0
	for total < n {
		turns := make([]turn, 2+int(r.Next()%5))
		for k := range turns {
			mean, sigma := 100.0, 1.0
			if k == 0 {
				mean, sigma = 3000, 0.5
			}
			turns[k].msg = lognormal(r, mean, sigma)
			turns[k].reply = lognormal(r, 300, 1.0)
		}
		if total+len(turns) > n {
			turns = turns[:n-total]
		}
		convs = append(convs, turns)
		total += len(turns)
	}
	t := newTrace(n)
	t.Groups = make([]string, len(convs))
	for c := range convs {
		t.Groups[c] = fmt.Sprintf("conversation-%d", c)
	}
	history := make([]int, len(convs))
	for k := 0; len(t.Requests) < n; k++ {
		for c, turns := range convs {
			if k >= len(turns) {
				continue
			}
			in := history[c] + turns[k].msg
			out := turns[k].reply
			t.Requests = append(t.Requests, Request{ID: len(t.Requests), Input: in, Output: out, Group: c, Shared: in + out})
			history[c] = in + out
		}
	}
	return t
}

// System prompts of the sysprompt workload.
const (
	sysPrompts   = 16
	sysMinTokens = 200
	sysSpread    = 601
	sysZipfS     = 1.1
)

func genSysPrompt(n int, seed uint64) *Trace {
	r := bench.NewSplitMix64(seed)
	t := newTrace(n)
	lens := make([]int, sysPrompts)
	t.Groups = make([]string, sysPrompts)
	for i := range lens {
		lens[i] = sysMinTokens + int(r.Next()%sysSpread)
		t.Groups[i] = fmt.Sprintf("system-%d", i)
	}
	z := bench.NewZipf(sysPrompts, sysZipfS)
	for i := range n {
		c := z.Draw(r)
		user := lognormal(r, shareGPTInputMean, shareGPTSigma)
		out := lognormal(r, shareGPTOutputMean, shareGPTSigma)
		t.Requests = append(t.Requests, Request{ID: i, Input: lens[c] + user, Output: out, Group: c, Shared: lens[c]})
	}
	return t
}

// WithPoissonArrivals sets arrival times as a Poisson process of rate requests per second:
// request i arrives at the sum of i+1 exponential gaps -ln(1 - Unit())/rate drawn from a
// SplitMix64 seeded with seed+1 (so lengths and arrivals do not share draws). A rate of 0
// or +Inf puts every arrival at time 0 (an offline batch, vLLM's --request-rate inf).
func WithPoissonArrivals(t *Trace, rate float64, seed uint64) {
	if rate <= 0 || math.IsInf(rate, 1) {
		for i := range t.Requests {
			t.Requests[i].Arrival = 0
		}
		return
	}
	r := bench.NewSplitMix64(seed + 1)
	at := 0.0
	for i := range t.Requests {
		at += -math.Log(1-r.Unit()) / rate
		t.Requests[i].Arrival = at
	}
}
