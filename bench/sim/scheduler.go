package sim

import (
	"fmt"
	"math"
	"slices"

	"github.com/kvpage/kvpage/internal/invariant"
)

// seq is one request's state in a simulation.
type seq struct {
	req       *Request
	generated int  // output tokens generated so far
	stored    int  // token states held (0 while waiting)
	preempted bool // preempted and not yet readmitted
	finished  bool
	// loading counts the transfers a scheme with tier links is loading the request's
	// prefix with (tierlinks.go; one per pool of the hybrid scheme), since step
	// loadSince; held says it has not produced a token since its admission, so the next
	// decode has none to store.
	loading   int
	loadSince int
	held      bool
	// stalled says its last grow found every block held or pinned by a copy in flight:
	// it generates nothing until a later step's grow succeeds. grown is how many of the
	// hybrid scheme's pools already hold the token that grow was giving a slot.
	stalled bool
	grown   int
	// A scheme keeps its own per-request state, indexed by req.ID (see schemeDef).
}

// allocator is what a scheme does to memory; the scheduler decides when.
type allocator interface {
	// admit gives s memory for its prompt (s.req.Input + s.generated tokens, the whole
	// history after a preemption) if that fits now and its prefill, whatever a prefix hit
	// leaves to compute, fits budget. It returns the tokens computed and the prefix hit.
	admit(s *seq, budget int) (prefill, hit int, ok bool, err error)
	// grow gives s a slot for one more token (the last one it generated). When memory runs
	// out it preempts running requests, possibly s itself, marks them preempted and
	// appends them to victims.
	grow(s *seq, victims []*seq) ([]*seq, error)
	// finish releases a finished request's memory.
	finish(s *seq) error
	// usage splits the budget; head is the first waiting request, or nil.
	usage(head *seq) Usage
	// check verifies the allocator's own books against the library's (tests and
	// kvinvariants builds); deep adds checks that cost a pass over every block.
	check(deep bool) error
}

// groupAllocator is an allocator of several KV-cache groups (the hybrid scheme): it says
// what each group's blocks held by running requests take, for Result.Groups.
type groupAllocator interface {
	groupNames() []string
	groupBytes(dst []int64) []int64
	budgetBytes() int64
}

// GroupShare is one KV-cache group's part of a run (see Result.Groups).
type GroupShare struct {
	// Name is the group's kind: full, sliding, chunked or state.
	Name string `json:"name"`
	// Share is the part of the budget its blocks in use take, averaged over the
	// saturated phase (the groups' shares add up to Shares.Tokens).
	Share float64 `json:"share"`
}

// Result is what one scheme measured.
type Result struct {
	// Groups is, for the hybrid scheme, each layer kind's share of the budget; nil for a
	// scheme of one group.
	Groups []GroupShare
	// Tiers is, for a paged scheme with lower tiers, each tier's figures over the whole
	// run, the device first; nil without tiers.
	Tiers  []TierResult
	Scheme Scheme
	// Capacity is the KV budget in tokens.
	Capacity int
	// Shares are the Usage parts as fractions of Capacity, averaged over the saturated
	// phase's steps.
	Shares Shares
	// MeanRunning and PeakRunning are over the saturated phase.
	MeanRunning float64
	PeakRunning int
	// CompletedPerKStep is requests completed per 1,000 steps of the saturated phase.
	CompletedPerKStep float64
	// Preemptions counts preemptions in the saturated phase (TotalPreemptions in the run).
	Preemptions, TotalPreemptions int
	// PrefixHitRate is prefix-hit tokens / prompt tokens over the saturated phase's first
	// admissions. Readmissions after preemption are not in it but in ResumedHitRate, as
	// vLLM counts preempted requests' lookups apart: their re-hits, mostly of their own
	// blocks, would flatter it.
	PrefixHitRate float64
	// ResumedApart says the scheme preempts (the paged and hybrid schemes, which mark
	// their readmissions blocktable.Request.Resumed and hybrid.Request.Resumed, so that
	// the library counts them apart too). ResumedHitRate is the readmissions' hit tokens
	// / prompt tokens over the saturated phase, ResumedPromptTokens their prompt tokens.
	ResumedApart        bool
	ResumedHitRate      float64
	ResumedPromptTokens int64
	// SaturatedSteps is the length of the measured phase; WaitingSteps how many of its
	// steps ended with a request still waiting; TotalSteps the whole run's.
	SaturatedSteps, WaitingSteps, TotalSteps int
	// Completed counts requests completed in the saturated phase; Requests the run's.
	Completed, Requests int
	// MeanOutput is the requests' mean output length: the steps one request lives once
	// admitted.
	MeanOutput float64
	// ShortPhase is true when the saturated phase lasted fewer than ShortPhaseLifetimes
	// mean request lifetimes (MeanOutput steps): the batch never turned over, so the
	// figures describe the ramp-up at the start more than a steady state, and should not
	// be compared. More requests, or less memory, lengthen the phase.
	ShortPhase bool
}

// ShortPhaseLifetimes is how many mean request lifetimes a saturated phase must last for
// its figures to be trusted (see Result.ShortPhase).
const ShortPhaseLifetimes = 2

// Simulate runs reqs (in arrival order, each within cfg.MaxModelLen; see Prepare) through
// one scheme under the iteration-level scheduler described in the package doc.
func Simulate(reqs []Request, cfg Config, s Scheme) (*Result, error) {
	return simulate(reqs, cfg, s, false)
}

// simulate is Simulate; with checkEveryStep, every step verifies the usage and the
// allocator's invariants (tests use it).
func simulate(reqs []Request, cfg Config, s Scheme, checkEveryStep bool) (*Result, error) {
	r, _, err := simulateWith(reqs, cfg, s, checkEveryStep)
	return r, err
}

// simulateWith is simulate, also returning the allocator the run drove (tests read its
// library's counters).
func simulateWith(reqs []Request, cfg Config, s Scheme, checkEveryStep bool) (*Result, allocator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if err := s.validate(&cfg); err != nil {
		return nil, nil, err
	}
	for i := range reqs {
		r := &reqs[i]
		if r.ID != i || r.Input < 1 || r.Output < 1 || r.Input+r.Output > cfg.MaxModelLen || r.Shared < 0 || r.Shared > r.Input+r.Output ||
			(r.Group < 0 && r.Shared != 0) || r.BaseShared < 0 || r.BaseShared > r.Shared || (r.BaseShared > 0 && r.Base < 0) ||
			r.After < 0 || r.After > i || r.Arrival < 0 || math.IsNaN(r.Arrival) || (i > 0 && r.Arrival < reqs[i-1].Arrival) {
			return nil, nil, fmt.Errorf("%w: request %d (%+v) is not a prepared request for max-model-len %d (see Prepare)", ErrInvalidConfig, i, *r, cfg.MaxModelLen)
		}
	}
	seqs := make([]seq, len(reqs))
	for i := range reqs {
		seqs[i].req = &reqs[i]
	}
	d, _ := lookupScheme(s.Name) // validated above
	a, err := d.build(&cfg, &s, seqs)
	if err != nil {
		return nil, nil, err
	}
	sch := &scheduler{cfg: cfg, a: a, reqs: reqs, seqs: seqs, res: &Result{Scheme: s, Capacity: cfg.Capacity, Requests: len(reqs)}, checkEveryStep: checkEveryStep}
	if err := sch.run(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.Label(), err)
	}
	return sch.res, a, nil
}

type scheduler struct {
	cfg  Config
	a    allocator
	reqs []Request
	res  *Result

	seqs      []seq
	next      int    // next request to arrive
	pending   []*seq // arrived, never admitted, in arrival order
	pendHead  int
	preempted []*seq // preempted, waiting to be readmitted, by request ID
	running   []*seq // in admission order
	victims   []*seq

	// sums over the saturated phase
	saturated                bool
	sum                      [6]int64
	groupSum                 []float64 // per group of a groupAllocator: bytes x steps
	groupBuf                 []int64
	steps, waitingSteps      int
	runningSum               int64
	peak                     int
	completed, preemptions   int
	promptTokens, hitTokens  int64
	totalPreempt, unreported int
	// resumedPrompt and resumedHit are readmissions' prompt and hit tokens, counted apart
	// from promptTokens and hitTokens.
	resumedPrompt, resumedHit int64

	// checkEveryStep makes every step verify the usage and the allocator's invariants, as
	// the kvinvariants build does; tests set it.
	checkEveryStep bool
	records        uint64
}

func (sc *scheduler) arrivalStep(r *Request) int {
	return int(math.Floor(r.Arrival / sc.cfg.StepDuration))
}

// followed reports whether request i may arrive as far as the request it follows is
// concerned: that one has finished, or it follows none. Until then neither it nor any
// later request arrives, so the trace's order is kept.
func (sc *scheduler) followed(i int) bool {
	a := sc.reqs[i].After
	return a == 0 || sc.seqs[i-a].finished
}

func (sc *scheduler) waiting() int { return len(sc.pending) - sc.pendHead + len(sc.preempted) }

// head is the first waiting request in FCFS order: preempted requests arrived before any
// request never admitted, so they go first.
func (sc *scheduler) head() *seq {
	if len(sc.preempted) > 0 {
		return sc.preempted[0]
	}
	if sc.pendHead < len(sc.pending) {
		return sc.pending[sc.pendHead]
	}
	return nil
}

func (sc *scheduler) popHead() {
	if len(sc.preempted) > 0 {
		sc.preempted = sc.preempted[1:]
		return
	}
	sc.pending[sc.pendHead] = nil
	sc.pendHead++
	if sc.pendHead > 1024 && sc.pendHead*2 > len(sc.pending) {
		n := copy(sc.pending, sc.pending[sc.pendHead:])
		sc.pending = sc.pending[:n]
		sc.pendHead = 0
	}
}

func (sc *scheduler) run() error {
	sc.saturated = true
	step := 0
	for {
		for sc.next < len(sc.reqs) && sc.arrivalStep(&sc.reqs[sc.next]) <= step && sc.followed(sc.next) {
			sc.pending = append(sc.pending, &sc.seqs[sc.next])
			sc.next++
		}
		if len(sc.running) == 0 && sc.waiting() == 0 {
			if sc.next == len(sc.reqs) {
				break
			}
			// Idle until the next arrival: one record stands for the whole stretch. (The
			// request the next one follows arrived earlier and neither runs nor waits, so
			// it has finished.)
			to := sc.arrivalStep(&sc.reqs[sc.next])
			sc.record(step, to-step)
			step = to
			continue
		}
		if err := sc.schedule(step); err != nil {
			return err
		}
		// The waiting queue emptied after the last arrival: this step is the saturated
		// phase's last, and the drain begins.
		drain := sc.next == len(sc.reqs) && sc.waiting() == 0
		if err := sc.generate(); err != nil {
			return err
		}
		if drain {
			sc.saturated = false
		}
		step++
	}
	if sc.cfg.Progress != nil && sc.unreported > 0 {
		sc.cfg.Progress(sc.unreported)
	}
	if ta, ok := sc.a.(tierAllocator); ok {
		if err := ta.transfers().drain(); err != nil {
			return err
		}
	}
	sc.finishResult(step)
	return nil
}

// schedule is the part of one step before the model runs: confirm the copies that have
// ended, decode the running requests, admit waiting ones within the step's token budget,
// and record the step. A step that leaves nothing running can never end (the head
// request does not fit an empty cache), so it is an error, unless copies in flight will
// free device blocks.
func (sc *scheduler) schedule(step int) error {
	if ta, ok := sc.a.(tierAllocator); ok {
		// The transfers that have ended by this step are confirmed first (tierlinks.go).
		if err := ta.transfers().advance(step); err != nil {
			return err
		}
	}
	budget := sc.cfg.MaxNumBatchedTokens
	if err := sc.decode(&budget); err != nil {
		return err
	}
	if err := sc.admit(budget); err != nil {
		return err
	}
	if len(sc.running) == 0 && !sc.copying() {
		h := sc.head()
		return fmt.Errorf("%w: request %d (prompt %d, output %d) cannot be admitted even into an empty cache", ErrInvalidConfig, h.req.ID, h.req.Input, h.req.Output)
	}
	sc.record(step, 1)
	return nil
}

// decode gives every running request, oldest first, a slot for the token it generated
// last step, preempting when memory runs out.
func (sc *scheduler) decode(budget *int) error {
	for _, s := range sc.running {
		if s.preempted || s.held {
			continue // a held request waits for its load: no token to store
		}
		var err error
		sc.victims, err = sc.a.grow(s, sc.victims[:0])
		if err != nil {
			return err
		}
		for _, v := range sc.victims {
			v.stored = 0
			sc.totalPreempt++
			if sc.saturated {
				sc.preemptions++
			}
			i, _ := slices.BinarySearchFunc(sc.preempted, v.req.ID, func(w *seq, id int) int { return w.req.ID - id })
			sc.preempted = slices.Insert(sc.preempted, i, v)
		}
		if !s.preempted && !s.stalled {
			*budget--
		}
	}
	sc.running = slices.DeleteFunc(sc.running, func(s *seq) bool { return s.preempted })
	return nil
}

// admit admits waiting requests in FCFS order while the caps and memory allow; it stops at
// the first that does not fit (no request overtakes another).
func (sc *scheduler) admit(budget int) error {
	for len(sc.running) < sc.cfg.MaxNumSeqs {
		h := sc.head()
		if h == nil {
			return nil
		}
		prefill, hit, ok, err := sc.a.admit(h, budget)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		budget -= prefill
		sc.popHead()
		if sc.saturated && h.preempted {
			sc.resumedPrompt += int64(h.stored)
			sc.resumedHit += int64(hit)
		} else if sc.saturated {
			sc.promptTokens += int64(h.stored)
			sc.hitTokens += int64(hit)
		}
		h.preempted = false
		sc.running = append(sc.running, h)
	}
	return nil
}

// generate produces one token for every running request and finishes those done.
func (sc *scheduler) generate() error {
	var firstErr error
	sc.running = slices.DeleteFunc(sc.running, func(s *seq) bool {
		if s.loading != 0 || s.stalled {
			return false // waiting for its load, or for a copy to free a block (tierlinks.go)
		}
		s.held = false
		s.generated++
		if s.generated < s.req.Output || firstErr != nil {
			return false
		}
		if err := sc.a.finish(s); err != nil {
			firstErr = err
			return false
		}
		s.stored = 0
		s.finished = true
		if sc.saturated {
			sc.completed++
		}
		sc.unreported++
		if sc.unreported == 1024 && sc.cfg.Progress != nil {
			sc.cfg.Progress(sc.unreported)
			sc.unreported = 0
		}
		return true
	})
	return firstErr
}

// copying reports whether copies are in flight whose end frees device blocks (tier
// links, tierlinks.go): a step may then leave nothing running and still end.
func (sc *scheduler) copying() bool {
	ta, ok := sc.a.(tierAllocator)
	return ok && ta.transfers().copying()
}

func (sc *scheduler) record(step, weight int) {
	u := sc.a.usage(sc.head())
	sc.records++
	if sc.checkEveryStep || invariant.Enabled {
		err := u.Check(sc.cfg.Capacity)
		if err == nil && (sc.checkEveryStep || invariant.Sample(sc.records)) {
			// The deep check walks every block: every step at first, then one in 64.
			err = sc.a.check(sc.records < 64 || sc.records%64 == 0)
		}
		if err != nil {
			panic(fmt.Sprintf("kvpage: broken invariant at step %d: %v", step, err))
		}
	}
	if sc.cfg.OnStep != nil {
		sc.cfg.OnStep(StepRecord{Step: step, Weight: weight, Running: len(sc.running), Waiting: sc.waiting(), Usage: u, Saturated: sc.saturated})
	}
	if !sc.saturated {
		return
	}
	w := int64(weight)
	for i, v := range [6]int64{u.Tokens, u.Reserved, u.Internal, u.External, u.Free, u.Cached} {
		sc.sum[i] += v * w
	}
	if ga, ok := sc.a.(groupAllocator); ok {
		sc.groupBuf = ga.groupBytes(sc.groupBuf)
		if sc.groupSum == nil {
			sc.groupSum = make([]float64, len(sc.groupBuf))
		}
		for i, b := range sc.groupBuf {
			sc.groupSum[i] += float64(b) * float64(w)
		}
	}
	sc.steps += weight
	if sc.waiting() > 0 {
		sc.waitingSteps += weight
	}
	sc.runningSum += int64(len(sc.running)) * w
	sc.peak = max(sc.peak, len(sc.running))
}

func (sc *scheduler) finishResult(totalSteps int) {
	r := sc.res
	r.TotalSteps = totalSteps
	r.SaturatedSteps = sc.steps
	r.WaitingSteps = sc.waitingSteps
	r.Completed = sc.completed
	r.Preemptions = sc.preemptions
	r.TotalPreemptions = sc.totalPreempt
	r.PeakRunning = sc.peak
	if sc.promptTokens > 0 {
		r.PrefixHitRate = float64(sc.hitTokens) / float64(sc.promptTokens)
	}
	if r.Scheme.allocatesBlocks() {
		r.ResumedApart, r.ResumedPromptTokens = true, sc.resumedPrompt
		if sc.resumedPrompt > 0 {
			r.ResumedHitRate = float64(sc.resumedHit) / float64(sc.resumedPrompt)
		}
	}
	var out int64
	for i := range sc.reqs {
		out += int64(sc.reqs[i].Output)
	}
	if len(sc.reqs) > 0 {
		r.MeanOutput = float64(out) / float64(len(sc.reqs))
	}
	r.ShortPhase = float64(sc.steps) < ShortPhaseLifetimes*r.MeanOutput
	if sc.steps == 0 {
		return
	}
	denom := float64(sc.cfg.Capacity) * float64(sc.steps)
	f := func(i int) float64 { return float64(sc.sum[i]) / denom }
	r.Shares = Shares{Tokens: f(0), Reserved: f(1), Internal: f(2), External: f(3), Free: f(4), Cached: f(5)}
	r.MeanRunning = float64(sc.runningSum) / float64(sc.steps)
	if ga, ok := sc.a.(groupAllocator); ok && sc.groupSum != nil {
		for i, name := range ga.groupNames() {
			r.Groups = append(r.Groups, GroupShare{Name: name, Share: sc.groupSum[i] / float64(ga.budgetBytes()) / float64(sc.steps)})
		}
	}
	r.CompletedPerKStep = 1000 * float64(sc.completed) / float64(sc.steps)
	if ta, ok := sc.a.(tierAllocator); ok {
		r.Tiers = ta.tierResults(totalSteps)
	}
}
