package cluster

import (
	"fmt"
	"math"

	"github.com/kvpage/kvpage/prefix"
)

// Candidate is one server a router may send a prompt to, as a Policy sees it.
type Candidate struct {
	Server string
	// Cached is the number of the prompt's leading blocks the server holds in GPU memory
	// (ServerHit.Blocks of the in-memory index).
	Cached int
	// Offloaded is the number of further leading blocks it holds only on a slower tier
	// (host memory, disk): loading them is cheaper than computing them, dearer than a GPU
	// hit. Zero where the index knows no tiers.
	Offloaded int
	// Load is the server's load in a unit the caller chooses and keeps for every
	// candidate (running plus waiting requests, KV-cache usage); at least 0.
	Load float64
}

// Policy chooses a server for a prompt of promptBlocks full blocks among cands (never
// empty) and returns its index in cands. A policy is deterministic: equal inputs give
// equal choices, ties go to the earliest candidate.
type Policy interface {
	Choose(promptBlocks int, cands []Candidate) int
}

// RoundRobin sends each prompt to the next candidate in turn, ignoring caches and load.
// Its zero value starts at the first. Not safe for concurrent use.
type RoundRobin struct{ next uint64 }

// Choose implements Policy.
func (r *RoundRobin) Choose(_ int, cands []Candidate) int {
	i := int(r.next % uint64(len(cands)))
	r.next++
	return i
}

// LeastLoaded sends each prompt to the candidate with the least load.
type LeastLoaded struct{}

// Choose implements Policy.
func (LeastLoaded) Choose(_ int, cands []Candidate) int {
	best := 0
	for i := range cands {
		if cands[i].Load < cands[best].Load {
			best = i
		}
	}
	return best
}

// PrefixAware sends each prompt to the candidate holding the longest cached prefix
// (Cached, then Offloaded), the least loaded among equals: what a router that follows the
// cache alone does. It piles a popular prefix onto one server.
type PrefixAware struct{}

// Choose implements Policy.
func (PrefixAware) Choose(_ int, cands []Candidate) int {
	best := 0
	for i := range cands {
		c, b := &cands[i], &cands[best]
		switch {
		case c.Cached != b.Cached:
			if c.Cached > b.Cached {
				best = i
			}
		case c.Offloaded != b.Offloaded:
			if c.Offloaded > b.Offloaded {
				best = i
			}
		case c.Load < b.Load:
			best = i
		}
	}
	return best
}

// PrefixLoad weighs the cached prefix against load. Each candidate scores
//
//	score = Weight · (Cached + OffloadedWeight · Offloaded) / promptBlocks
//	      − (1 − Weight) · Load / maxLoad
//
// where maxLoad is the largest Load among the candidates (the load term is 0 when every
// load is 0, and the prefix term 0 for a prompt without a full block), and the highest
// score wins, ties to the earliest candidate. Both terms lie in [0, 1]: Weight 1 is
// PrefixAware without its tie rule, Weight 0 is LeastLoaded. llm-d's scheduler adds a
// prefix-cache scorer and a load scorer with weights the same way; Dynamo's KV router
// trades the blocks left to prefill against the blocks active on each worker.
type PrefixLoad struct {
	// Weight is the prefix term's weight, in [0, 1].
	Weight float64
	// OffloadedWeight is what a block on a slower tier is worth against a GPU block, in
	// [0, 1].
	OffloadedWeight float64
}

// Score returns a candidate's score under the formula above.
func (p PrefixLoad) Score(promptBlocks int, c Candidate, maxLoad float64) float64 {
	s := 0.0
	if promptBlocks > 0 {
		s = p.Weight * (float64(c.Cached) + p.OffloadedWeight*float64(c.Offloaded)) / float64(promptBlocks)
	}
	if maxLoad > 0 {
		s -= (1 - p.Weight) * c.Load / maxLoad
	}
	return s
}

// Choose implements Policy.
func (p PrefixLoad) Choose(promptBlocks int, cands []Candidate) int {
	maxLoad := 0.0
	for i := range cands {
		maxLoad = max(maxLoad, cands[i].Load)
	}
	best, bestScore := 0, math.Inf(-1)
	for i := range cands {
		if s := p.Score(promptBlocks, cands[i], maxLoad); s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// Router routes prompts with an Index and a Policy: it looks the prompt up once, gives
// each candidate server its cached prefix and its load, and lets the policy choose. It
// reuses its buffers: not safe for concurrent use (give each goroutine its own Router over
// the shared Index).
type Router struct {
	Index  Index
	Policy Policy

	hits  []ServerHit
	cands []Candidate
}

// Decision is where a Router sent a prompt.
type Decision struct {
	Server string
	// Cached is the chosen server's cached prefix in blocks; Best the longest any
	// candidate holds.
	Cached, Best int
}

// Route chooses among servers (the candidates, in the order ties are broken; their
// loads in loads, same length, each finite and at least 0) for p. An Index error (a
// backend that is down) is returned with no decision: the caller may fall back to a
// policy that needs no index.
func (r *Router) Route(p *prefix.Prompt, servers []string, loads []float64) (Decision, error) {
	if len(servers) == 0 || len(loads) != len(servers) {
		return Decision{}, fmt.Errorf("%w: %d servers, %d loads", ErrInvalidArgument, len(servers), len(loads))
	}
	for _, l := range loads {
		if !(l >= 0) || math.IsInf(l, 0) {
			return Decision{}, fmt.Errorf("%w: load %v", ErrInvalidArgument, l)
		}
	}
	var err error
	r.hits, err = r.Index.Match(r.hits[:0], p)
	if err != nil {
		return Decision{}, err
	}
	r.cands = r.cands[:0]
	best := 0
	for i, s := range servers {
		c := Candidate{Server: s, Load: loads[i]}
		for _, h := range r.hits {
			if h.Server == s {
				c.Cached = h.Blocks
				break
			}
		}
		best = max(best, c.Cached)
		r.cands = append(r.cands, c)
	}
	blocks := 0
	if bs := r.blockSize(); bs > 0 {
		blocks = len(p.Tokens) / bs
	}
	i := r.Policy.Choose(blocks, r.cands)
	return Decision{Server: r.cands[i].Server, Cached: r.cands[i].Cached, Best: best}, nil
}

func (r *Router) blockSize() int {
	if b, ok := r.Index.(interface{ BlockSize() int }); ok {
		return b.BlockSize()
	}
	return 0
}
