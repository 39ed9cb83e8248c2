package sim

import (
	"fmt"

	"github.com/kvpage/kvpage/bench"
	"github.com/kvpage/kvpage/blocks"
	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/evict"
	"github.com/kvpage/kvpage/prefix"
)

// This file is the retention replay: a cache-level replay of the agentic, flood and queue
// workloads (see the package doc, "Retention replays") through a blocktable.Manager, one
// request at a time (admit, append the reply, finish), so that what differs between
// schemes is only what the cache keeps. The logical clock is set to event << eventShift
// before each event, so that retention durations read in events.

// eventShift puts one replay event at 2^20 ticks of the clock: more than any one event's
// operations tick, so that time in events is clock >> eventShift.
const eventShift = 20

// AgenticParams defines the agentic workload (documented in the package doc).
type AgenticParams struct {
	Sessions, Concurrent         int
	SystemPrompts, SystemTokens  int
	TurnsMin, TurnsMax           int
	ToolMin, ToolMax             int // tool output or user message per turn
	ReplyMin, ReplyMax           int
	ShortPauseMin, ShortPauseMax int // events between a reply and the next turn
	LongPauseMin, LongPauseMax   int
	LongPausePercent             int
	BackgroundPercent            int // chance per event of a one-shot request
	BackgroundMin, BackgroundMax int
	BlockSize, Blocks            int // the cache: blocks of BlockSize tokens
	SessionTTL                   int // events a session hold lasts (session schemes)
	Seed                         uint64
}

// DefaultAgentic is the agentic workload of bench/README.md.
var DefaultAgentic = AgenticParams{
	Sessions: 300, Concurrent: 24, SystemPrompts: 16, SystemTokens: 1024,
	TurnsMin: 3, TurnsMax: 12, ToolMin: 128, ToolMax: 1024, ReplyMin: 32, ReplyMax: 256,
	ShortPauseMin: 1, ShortPauseMax: 8, LongPauseMin: 40, LongPauseMax: 120, LongPausePercent: 30,
	BackgroundPercent: 60, BackgroundMin: 256, BackgroundMax: 2048,
	BlockSize: 16, Blocks: 6144, SessionTTL: 150, Seed: 42,
}

// RetentionScheme is one way of keeping the cache for the retention replays.
type RetentionScheme struct {
	// Name is the row's name: lru, s3fifo, session, pinned, session+pinned.
	Name string
	// Policy is the eviction policy ("lru", "s3fifo", "priority").
	Policy string
	// Sessions holds each session's context for SessionTTL events after each turn.
	Sessions bool
	// PinPrompts pins every system prompt once first computed (budget: all of them).
	PinPrompts bool
}

// AgenticSchemes are the rows of the agentic figure.
var AgenticSchemes = []RetentionScheme{
	{Name: "lru", Policy: "lru"},
	{Name: "s3fifo", Policy: "s3fifo"},
	{Name: "session", Policy: "priority", Sessions: true},
	{Name: "pinned", Policy: "lru", PinPrompts: true},
	{Name: "session+pinned", Policy: "priority", Sessions: true, PinPrompts: true},
}

// AgenticResult is one scheme's figures on the agentic workload.
type AgenticResult struct {
	Scheme string
	// Turns and PromptTokens count the agents' turns; HitTokens their prefix hits.
	Turns, PromptTokens, HitTokens int64
	// Recomputed counts tokens of a turn's previous context (what the last turn left in
	// full blocks, at most its prompt minus one token) that missed and were computed again.
	Recomputed int64
	// Resumed counts turns after the first; Survived those whose whole previous context
	// hit; by pause class.
	ShortResumed, ShortSurvived, LongResumed, LongSurvived int64
	// BackgroundTokens and BackgroundHits are the one-shot traffic's.
	BackgroundTokens, BackgroundHits int64
	Evictions                        uint64
}

// HitRate is the agents' token hit rate.
func (r *AgenticResult) HitRate() float64 { return ratio(r.HitTokens, r.PromptTokens) }

// ShortSurvival and LongSurvival are the fractions of resumed turns whose previous
// context survived the pause, by pause class.
func (r *AgenticResult) ShortSurvival() float64 { return ratio(r.ShortSurvived, r.ShortResumed) }

// LongSurvival is ShortSurvival for long pauses.
func (r *AgenticResult) LongSurvival() float64 { return ratio(r.LongSurvived, r.LongResumed) }

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// replayStack is a Manager over a fresh pool and index for one replay.
type replayStack struct {
	pool  *blocks.Pool
	idx   *prefix.Index
	m     *blocktable.Manager
	clock *evict.Counter
	bs    int
}

func newReplayStack(nblocks, bs int, policy string, opts ...prefix.Option) (*replayStack, error) {
	pool, err := blocks.New(nblocks+1, blocks.WithNullBlock())
	if err != nil {
		return nil, err
	}
	f, err := evict.ByName(policy)
	if err != nil {
		return nil, err
	}
	clock := &evict.Counter{}
	idx, err := prefix.New(pool, bs, append([]prefix.Option{prefix.WithClock(clock), prefix.WithPolicy(f)}, opts...)...)
	if err != nil {
		return nil, err
	}
	m, err := blocktable.New(blocktable.Config{Pool: pool, Index: idx})
	if err != nil {
		return nil, err
	}
	return &replayStack{pool: pool, idx: idx, m: m, clock: clock, bs: bs}, nil
}

// at moves the clock to event e.
func (s *replayStack) at(e int) {
	if t := uint64(e) << eventShift; t > s.clock.Now() {
		s.clock.Set(t)
	}
}

// run admits prompt as seq, appends reply, and finishes it (FinishTurn when session > 0
// and ttl > 0). It returns the prefix hit in tokens.
func (s *replayStack) run(seq blocktable.SeqID, ns prefix.Namespace, prompt, reply []int32, session prefix.SessionID, ttl int) (int, error) {
	res, err := s.m.Admit(seq, &blocktable.Request{Namespace: ns, Prompt: prompt, MaxTokens: len(prompt) + len(reply)})
	if err != nil {
		return 0, err
	}
	if len(reply) > 0 {
		if _, err := s.m.Append(seq, reply, 0); err != nil {
			return 0, err
		}
	}
	if session != 0 && ttl > 0 {
		r := prefix.Retention{Priority: prefix.SessionPriority, Until: s.clock.Now() + uint64(ttl)<<eventShift}
		_, err = s.m.FinishTurn(seq, session, r)
	} else {
		err = s.m.Finish(seq)
	}
	return res.HitTokens, err
}

type agent struct {
	session   int
	system    int
	turns     int // turns left
	due       int // event of the next turn
	long      bool
	ctx       []int32 // tokens so far: system prompt, tool outputs, replies
	prevIdeal int     // tokens of ctx the next turn can hit at best
}

// tokenSource hands out token ids no other request uses.
type tokenSource struct{ next int32 }

func (t *tokenSource) fresh(dst []int32, n int) []int32 {
	for range n {
		if t.next < groupTokenSpace {
			t.next = groupTokenSpace
		}
		dst = append(dst, t.next)
		t.next++
	}
	return dst
}

// ReplayAgentic runs the agentic workload under scheme.
func ReplayAgentic(p AgenticParams, scheme RetentionScheme) (*AgenticResult, error) {
	s, err := newReplayStack(p.Blocks, p.BlockSize, scheme.Policy, prefix.WithPinBudget(p.SystemPrompts*p.SystemTokens/p.BlockSize))
	if err != nil {
		return nil, err
	}
	r := bench.NewSplitMix64(p.Seed)
	uniform := func(a, b int) int { return a + int(r.Next()%uint64(b-a+1)) }
	systems := make([][]int32, p.SystemPrompts)
	for i := range systems {
		for j := range p.SystemTokens {
			systems[i] = append(systems[i], groupToken(p.Seed, i, j))
		}
	}
	pinned := make([]bool, p.SystemPrompts)
	res := &AgenticResult{Scheme: scheme.Name}
	var active []*agent
	var toks tokenSource
	opened, seq := 0, blocktable.SeqID(0)
	ttl := 0
	if scheme.Sessions {
		ttl = p.SessionTTL
	}
	var reply, prompt []int32
	for e := 0; opened < p.Sessions || len(active) > 0; e++ {
		s.at(e)
		for len(active) < p.Concurrent && opened < p.Sessions {
			opened++
			a := &agent{session: opened, system: int(r.Next() % uint64(p.SystemPrompts)), turns: uniform(p.TurnsMin, p.TurnsMax), due: e}
			a.ctx = append(a.ctx, systems[a.system]...)
			active = append(active, a)
		}
		for i := 0; i < len(active); i++ {
			a := active[i]
			if a.due != e {
				continue
			}
			prompt = toks.fresh(append(prompt[:0], a.ctx...), uniform(p.ToolMin, p.ToolMax))
			reply = toks.fresh(reply[:0], uniform(p.ReplyMin, p.ReplyMax))
			seq++
			hold := ttl
			if a.turns == 1 {
				hold = 0 // the last turn: nothing to keep
			}
			hit, err := s.run(seq, prefix.Namespace{}, prompt, reply, prefix.SessionID(a.session), hold)
			if err != nil {
				return nil, fmt.Errorf("event %d, session %d: %w", e, a.session, err)
			}
			res.Turns++
			res.PromptTokens += int64(len(prompt))
			res.HitTokens += int64(hit)
			if a.prevIdeal > 0 { // a resumed turn
				if hit < a.prevIdeal {
					res.Recomputed += int64(a.prevIdeal - hit)
				}
				survived := int64(0)
				if hit >= a.prevIdeal {
					survived = 1
				}
				if a.long {
					res.LongResumed++
					res.LongSurvived += survived
				} else {
					res.ShortResumed++
					res.ShortSurvived += survived
				}
			}
			if scheme.PinPrompts && !pinned[a.system] {
				ids, _ := s.idx.Peek(nil, &prefix.Prompt{Tokens: systems[a.system]}, false)
				if _, err := s.idx.Pin(ids); err != nil {
					return nil, err
				}
				pinned[a.system] = true
			}
			a.ctx = append(append(a.ctx[:0], prompt...), reply...)
			// The next turn's prompt is longer than ctx, so the cap never bites: its best
			// hit is every full block of ctx.
			a.prevIdeal = len(a.ctx) / p.BlockSize * p.BlockSize
			a.turns--
			if a.turns == 0 {
				if scheme.Sessions {
					s.m.ReleaseSession(prefix.SessionID(a.session))
				}
				active = append(active[:i], active[i+1:]...)
				i--
				continue
			}
			a.long = int(r.Next()%100) < p.LongPausePercent
			if a.long {
				a.due = e + uniform(p.LongPauseMin, p.LongPauseMax)
			} else {
				a.due = e + uniform(p.ShortPauseMin, p.ShortPauseMax)
			}
		}
		if int(r.Next()%100) < p.BackgroundPercent {
			prompt = toks.fresh(prompt[:0], uniform(p.BackgroundMin, p.BackgroundMax))
			seq++
			hit, err := s.run(seq, prefix.Namespace{}, prompt, nil, 0, 0)
			if err != nil {
				return nil, fmt.Errorf("event %d, background: %w", e, err)
			}
			res.BackgroundTokens += int64(len(prompt))
			res.BackgroundHits += int64(hit)
		}
	}
	res.Evictions = s.idx.Stats().Evictions
	if err := s.m.CheckInvariants(); err != nil {
		return nil, err
	}
	return res, nil
}

// FloodParams defines the two-tenant flood workload (documented in the package doc).
type FloodParams struct {
	Documents, DocumentTokens int // the victim's working set: documents it asks about
	QuestionMin, QuestionMax  int
	VictimPercent             int // chance per event of a victim request
	FloodPerEvent             int // flood requests per event, each with a prompt of its own
	FloodMin, FloodMax        int
	Events                    int
	BlockSize, Blocks         int
	// FloodQuota caps the flood tenant's cached blocks in the "quota" run.
	FloodQuota int
	// Policy is the cache's eviction policy (evict.Names); "" means lru.
	Policy string
	Seed   uint64
}

// DefaultFlood is the flood workload of bench/README.md.
var DefaultFlood = FloodParams{
	Documents: 12, DocumentTokens: 1024, QuestionMin: 16, QuestionMax: 128, VictimPercent: 30,
	FloodPerEvent: 2, FloodMin: 512, FloodMax: 1536, Events: 20000,
	BlockSize: 16, Blocks: 2048, FloodQuota: 1024, Seed: 42,
}

// FloodResult is one run's figures on the flood workload.
type FloodResult struct {
	Quota                            bool
	Policy                           string
	VictimTokens, VictimHits         int64
	FloodTokens, FloodHits           int64
	VictimEvicted, FloodEvictedQuota int64 // blocks; FloodEvictedQuota: by the quota
}

// VictimHitRate is the victim tenant's token hit rate.
func (r *FloodResult) VictimHitRate() float64 { return ratio(r.VictimHits, r.VictimTokens) }

// ReplayFlood runs the flood workload under p.Policy (LRU by default), with or without
// the flood tenant's quota.
func ReplayFlood(p FloodParams, quota bool) (*FloodResult, error) {
	victim, flood := prefix.Namespace{Salt: "victim"}, prefix.Namespace{Salt: "flood"}
	var opts []prefix.Option
	if quota {
		opts = append(opts, prefix.WithQuotas())
	}
	policy := p.Policy
	if policy == "" {
		policy = "lru"
	}
	s, err := newReplayStack(p.Blocks, p.BlockSize, policy, opts...)
	if err != nil {
		return nil, err
	}
	if quota {
		if err := s.idx.SetQuota(flood, p.FloodQuota); err != nil {
			return nil, err
		}
	}
	r := bench.NewSplitMix64(p.Seed)
	uniform := func(a, b int) int { return a + int(r.Next()%uint64(b-a+1)) }
	z := bench.NewZipf(p.Documents, 1.1)
	docs := make([][]int32, p.Documents)
	for i := range docs {
		for j := range p.DocumentTokens {
			docs[i] = append(docs[i], groupToken(p.Seed, i, j))
		}
	}
	res := &FloodResult{Quota: quota, Policy: policy}
	var toks tokenSource
	var prompt []int32
	seq := blocktable.SeqID(0)
	for e := range p.Events {
		s.at(e)
		if int(r.Next()%100) < p.VictimPercent {
			d := z.Draw(r)
			prompt = toks.fresh(append(prompt[:0], docs[d]...), uniform(p.QuestionMin, p.QuestionMax))
			seq++
			hit, err := s.run(seq, victim, prompt, nil, 0, 0)
			if err != nil {
				return nil, err
			}
			res.VictimTokens += int64(len(prompt))
			res.VictimHits += int64(hit)
		}
		for range p.FloodPerEvent {
			prompt = toks.fresh(prompt[:0], uniform(p.FloodMin, p.FloodMax))
			seq++
			hit, err := s.run(seq, flood, prompt, nil, 0, 0)
			if err != nil {
				return nil, err
			}
			res.FloodTokens += int64(len(prompt))
			res.FloodHits += int64(hit)
		}
	}
	if err := s.m.CheckInvariants(); err != nil {
		return nil, err
	}
	return res, nil
}

// QueueParams defines the queue-ordering replay on the sysprompt workload.
type QueueParams struct {
	Requests      int
	ArrivalsPer10 int // mean arrivals per 10 steps (Poisson-like: binomial over 40 slots)
	AdmitPerStep  int
	BlockSize     int
	Blocks        int
	Seed          uint64
}

// DefaultQueue is the queue replay of bench/README.md.
var DefaultQueue = QueueParams{Requests: 20000, ArrivalsPer10: 38, AdmitPerStep: 4, BlockSize: 16, Blocks: 256, Seed: 42}

// QueueResult is one ordering's figures.
type QueueResult struct {
	Order                         string
	PromptTokens, HitTokens       int64
	LongestWait, TotalWait, Count int64
}

// HitRate is the token hit rate.
func (r *QueueResult) HitRate() float64 { return ratio(r.HitTokens, r.PromptTokens) }

// MeanWait is the mean number of steps from arrival to admission.
func (r *QueueResult) MeanWait() float64 { return ratio(r.TotalWait, r.Count) }

// ReplayQueue replays the sysprompt workload through a waiting queue: each step, new
// requests arrive and the first AdmitPerStep of the queue, in the order given (FCFS when
// order is nil, else order.Order), are admitted and finished. Prompts only: the replies
// of the sysprompt workload are private and never reused.
func ReplayQueue(p QueueParams, name string, order *prefix.QueueOrder) (*QueueResult, error) {
	s, err := newReplayStack(p.Blocks, p.BlockSize, "lru")
	if err != nil {
		return nil, err
	}
	t := genSysPrompt(p.Requests, p.Seed)
	prompts := make([]prefix.Prompt, len(t.Requests))
	for i := range t.Requests {
		rq := &t.Requests[i]
		toks := make([]int32, min(rq.Input, 4096))
		for j := range toks {
			toks[j] = Token(p.Seed, rq, j)
		}
		prompts[i].Tokens = toks
	}
	r := bench.NewSplitMix64(p.Seed + 7)
	res := &QueueResult{Order: name}
	var q []prefix.Waiting
	var idx []int
	next := 0
	for step := 0; next < len(prompts) || len(q) > 0; step++ {
		for range 40 { // binomial(40, ArrivalsPer10/400) arrivals a step
			if next < len(prompts) && int(r.Next()%400) < p.ArrivalsPer10 {
				q = append(q, prefix.Waiting{Prompt: &prompts[next], Since: uint64(step)})
				next++
			}
		}
		s.at(step)
		idx = idx[:0]
		if order == nil {
			for i := range min(p.AdmitPerStep, len(q)) {
				idx = append(idx, i)
			}
		} else {
			idx = order.Order(s.idx, q, uint64(step), idx)
			idx = idx[:min(p.AdmitPerStep, len(idx))]
		}
		for _, i := range idx {
			w := q[i]
			hit, err := s.run(blocktable.SeqID(step)<<8|blocktable.SeqID(i), prefix.Namespace{}, w.Prompt.Tokens, nil, 0, 0)
			if err != nil {
				return nil, err
			}
			res.PromptTokens += int64(len(w.Prompt.Tokens))
			res.HitTokens += int64(hit)
			wait := int64(uint64(step) - w.Since)
			res.TotalWait += wait
			res.LongestWait = max(res.LongestWait, wait)
			res.Count++
			q[i].Prompt = nil
		}
		kept := q[:0]
		for _, w := range q {
			if w.Prompt != nil {
				kept = append(kept, w)
			}
		}
		q = kept
	}
	return res, s.m.CheckInvariants()
}
