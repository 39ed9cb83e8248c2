package sim

import (
	"fmt"
	"math"
	"slices"

	"github.com/kvpage/kvpage/prefix"
	"github.com/kvpage/kvpage/prefix/cluster"
	"github.com/kvpage/kvpage/prefix/kvevents"
	"github.com/kvpage/kvpage/prefix/vllmhash"
)

// The routing policies of the fleet simulator (FleetConfig.Policy).
const (
	RoundRobin  = "round-robin"
	LeastLoaded = "least-loaded"
	PrefixAware = "prefix"
	PrefixLoad  = "prefix-load"
)

// FleetPolicies lists the routing policies in the order reports show them.
func FleetPolicies() []string { return []string{RoundRobin, LeastLoaded, PrefixAware, PrefixLoad} }

// FleetSeed is the PYTHONHASHSEED the simulated servers hash blocks with.
const FleetSeed = "0"

// FleetConfig is a simulated fleet: identical servers behind one router.
type FleetConfig struct {
	// Servers is the number of servers (at least 1).
	Servers int
	// Server is every server's memory and scheduler caps.
	Server Config
	// Scheme is every server's scheme: Paged, with prefix sharing.
	Scheme Scheme
	// Policy names the router's policy (FleetPolicies).
	Policy string
	// Weight is PrefixLoad's prefix weight, in [0, 1] (cluster.PrefixLoad).
	Weight float64
	// EventDelay is the steps between the step a server's events happen in and the step
	// at whose start the router applies them (0: before the next step's routing).
	EventDelay int
	// Publish, when set, carries every server's encoded batches instead of the
	// simulator's delayed delivery (EventDelay is then unused), and Index is the
	// router's index that the caller's transport feeds: a smoke test over a real
	// transport. Runs are then as deterministic as the transport.
	Publish func(server string, payload []byte) error
	Index   cluster.Index
	// OnStep, when set, is called after every simulated step with each server's
	// outstanding requests (routed, not finished); the slice is reused.
	OnStep func(step int, outstanding []int)
}

// FleetResult is what one fleet run measured, over the whole run.
type FleetResult struct {
	Policy     string
	Servers    int
	EventDelay int
	// Requests routed; Completed finished (all of them: the run drains).
	Requests, Completed int
	// Steps is the run's length.
	Steps int
	// HitRate is the servers' prefix-hit tokens / prompt tokens over every first
	// admission, fleet-wide; readmissions after preemption are left out, as in
	// Result.PrefixHitRate (their re-hits of their own blocks would flatter it).
	HitRate float64
	// RoutedHitRate is what the router expected: the cached prefix of the chosen server
	// in its index, in tokens, / prompt tokens at routing. Above HitRate when the
	// server evicted the blocks, or lags, by the time the request is admitted.
	RoutedHitRate float64
	// Imbalance is, averaged over the steps with an outstanding request, the most
	// outstanding requests on one server / the mean over servers (1 is perfect balance).
	Imbalance float64
	// Preemptions counts preemptions on every server.
	Preemptions int
	// CompletedPerStep is the requests completed per step while requests still arrive
	// (steps 0 to the last arrival's routing): the fleet's throughput under the offered
	// load, before the drain at the end.
	CompletedPerStep float64
	// ArrivalSteps is that phase's length.
	ArrivalSteps int
	// Batches counts event batches the router applied.
	Batches int
}

type fleetServer struct {
	name    string
	sc      *scheduler
	events  *kvevents.Batcher
	done    int // completions counted so far
	pending int // routed, not finished
}

type fleetBatch struct {
	due     int
	server  int
	payload []byte
}

// SimulateFleet runs reqs (prepared, as for Simulate, with arrival times: see
// WithPoissonArrivals) through a fleet: each request is routed when it arrives, by the
// policy, with the router's cluster.ClusterIndex as it stands then, to one server, whose
// scheduler runs it exactly as Simulate's does. Every server's prefix index hashes blocks
// as vLLM does (vllmhash, seed FleetSeed) and reports its events to a kvevents.Batcher;
// after each step, the server's batch is encoded, and decoded and applied to the router's
// index EventDelay steps later. Everything is deterministic: logical steps, ties to the
// lowest server number.
func SimulateFleet(reqs []Request, fc FleetConfig) (*FleetResult, error) {
	if fc.Servers < 1 || fc.Servers > 4096 {
		return nil, fmt.Errorf("%w: %d servers (1 to 4,096)", ErrInvalidConfig, fc.Servers)
	}
	if fc.EventDelay < 0 || fc.EventDelay > 1<<20 {
		return nil, fmt.Errorf("%w: event delay %d steps", ErrInvalidConfig, fc.EventDelay)
	}
	if fc.Scheme.Name != Paged || !fc.Scheme.PrefixSharing {
		return nil, fmt.Errorf("%w: a fleet runs the paged scheme with prefix sharing", ErrInvalidConfig)
	}
	if !(fc.Weight >= 0 && fc.Weight <= 1) {
		return nil, fmt.Errorf("%w: weight %v outside [0, 1]", ErrInvalidConfig, fc.Weight)
	}
	var policy cluster.Policy
	switch fc.Policy {
	case RoundRobin:
		policy = &cluster.RoundRobin{}
	case LeastLoaded:
		policy = cluster.LeastLoaded{}
	case PrefixAware:
		policy = cluster.PrefixAware{}
	case PrefixLoad:
		policy = cluster.PrefixLoad{Weight: fc.Weight}
	default:
		return nil, fmt.Errorf("%w: routing policy %q (one of %v)", ErrInvalidConfig, fc.Policy, FleetPolicies())
	}
	cfg := fc.Server
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := fc.Scheme.validate(&cfg); err != nil {
		return nil, err
	}
	for i := range reqs {
		if r := &reqs[i]; r.ID != i || r.Input+r.Output > cfg.MaxModelLen || (i > 0 && r.Arrival < reqs[i-1].Arrival) {
			return nil, fmt.Errorf("%w: request %d is not a prepared request (see Prepare)", ErrInvalidConfig, i)
		}
	}
	f, err := newFleet(reqs, fc, cfg, policy)
	if err != nil {
		return nil, err
	}
	if err := f.run(); err != nil {
		return nil, err
	}
	return f.result(), nil
}

type fleet struct {
	fc      FleetConfig
	cfg     Config
	reqs    []Request
	seqs    []seq
	servers []*fleetServer
	names   []string
	loads   []float64
	out     []int
	index   *cluster.ClusterIndex
	router  cluster.Router
	queue   []fleetBatch // in due order (due is step + a constant delay)
	dec     kvevents.Decoder
	batch   kvevents.Batch
	prompt  prefix.Prompt
	next    int
	steps   int
	batches int

	routedPrompt, routedHit int64
	imbalanceSum            float64
	busySteps               int
	arrivalSteps            int
	arrivalCompleted        int
}

func newFleet(reqs []Request, fc FleetConfig, cfg Config, policy cluster.Policy) (*fleet, error) {
	f := &fleet{fc: fc, cfg: cfg, reqs: reqs, seqs: make([]seq, len(reqs))}
	for i := range reqs {
		f.seqs[i].req = &reqs[i]
	}
	blocks := cfg.Capacity / fc.Scheme.BlockSize
	idx, err := cluster.NewClusterIndex(vllmhash.NewSHA256CBOR(FleetSeed), fc.Scheme.BlockSize, cluster.WithMaxBlocksPerServer(max(blocks, 1)))
	if err != nil {
		return nil, err
	}
	f.index = idx
	f.router = cluster.Router{Index: idx, Policy: policy}
	if fc.Publish != nil {
		if fc.Index == nil {
			return nil, fmt.Errorf("%w: Publish without the Index it feeds", ErrInvalidConfig)
		}
		f.router.Index = fc.Index
	}
	for i := range fc.Servers {
		ev, err := kvevents.NewBatcher()
		if err != nil {
			return nil, err
		}
		p, err := newPaged(&cfg, fc.Scheme, f.seqs, prefix.WithHasher(vllmhash.NewSHA256CBOR(FleetSeed)), prefix.WithObserver(ev))
		if err != nil {
			return nil, err
		}
		s := &fleetServer{
			name:   fmt.Sprintf("server-%04d", i), // sorted names: ties go to the lowest number
			events: ev,
			sc:     &scheduler{cfg: cfg, a: p, reqs: reqs, seqs: f.seqs, res: &Result{Scheme: fc.Scheme, Capacity: cfg.Capacity}, saturated: true},
		}
		f.servers = append(f.servers, s)
		f.names = append(f.names, s.name)
		idx.AddServer(s.name)
	}
	f.loads = make([]float64, fc.Servers)
	f.out = make([]int, fc.Servers)
	return f, nil
}

func (f *fleet) idle() bool {
	for _, s := range f.servers {
		if len(s.sc.running) > 0 || s.sc.waiting() > 0 {
			return false
		}
	}
	return true
}

func (f *fleet) arrivalStep(r *Request) int { return int(math.Floor(r.Arrival / f.cfg.StepDuration)) }

func (f *fleet) followed(i int) bool {
	a := f.reqs[i].After
	return a == 0 || f.seqs[i-a].finished
}

func (f *fleet) run() error {
	step := 0
	for {
		f.deliver(step)
		for f.next < len(f.reqs) && f.arrivalStep(&f.reqs[f.next]) <= step && f.followed(f.next) {
			if err := f.route(f.next); err != nil {
				return err
			}
			f.next++
		}
		if f.next == len(f.reqs) && f.arrivalSteps == 0 {
			f.arrivalSteps = step + 1
			for _, s := range f.servers {
				f.arrivalCompleted += s.sc.completed
			}
		}
		if f.idle() {
			if f.next == len(f.reqs) {
				break
			}
			// Nothing runs until the next arrival: skip there (its events are due by then).
			step = max(step+1, f.arrivalStep(&f.reqs[f.next]))
			continue
		}
		for _, s := range f.servers {
			if err := f.stepServer(s, step); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
		f.measure(step)
		step++
	}
	f.steps = step
	f.deliver(math.MaxInt)
	return nil
}

func (f *fleet) stepServer(s *fleetServer, step int) error {
	sc := s.sc
	if len(sc.running) > 0 || sc.waiting() > 0 {
		if err := sc.schedule(step); err != nil {
			return err
		}
		if err := sc.generate(); err != nil {
			return err
		}
		s.pending -= sc.completed - s.done
		s.done = sc.completed
	}
	if s.events.Len() > 0 && f.fc.Publish != nil {
		if err := f.fc.Publish(s.name, s.events.AppendBatch(nil, float64(step))); err != nil {
			return err
		}
		f.batches++
	} else if s.events.Len() > 0 {
		f.queue = append(f.queue, fleetBatch{due: step + 1 + f.fc.EventDelay, server: slices.Index(f.servers, s), payload: s.events.AppendBatch(nil, float64(step))})
	}
	return nil
}

// deliver decodes and applies, in order, every batch due by step.
func (f *fleet) deliver(step int) {
	n := 0
	for n < len(f.queue) && f.queue[n].due <= step {
		b := &f.queue[n]
		if err := f.dec.Decode(b.payload, &f.batch); err != nil {
			panic(fmt.Sprintf("kvpage: the fleet simulator's own batch does not decode: %v", err))
		}
		if err := f.index.Apply(f.servers[b.server].name, &f.batch); err != nil {
			panic(fmt.Sprintf("kvpage: the fleet simulator's own batch does not apply: %v", err))
		}
		f.batches++
		n++
	}
	f.queue = f.queue[:copy(f.queue, f.queue[n:])]
}

// route sends request i to a server: the router's load figure is its own count of the
// requests it sent each server that have not finished.
func (f *fleet) route(i int) error {
	r := &f.reqs[i]
	toks := f.prompt.Tokens[:0]
	for p := range r.Input {
		toks = append(toks, Token(f.cfg.Seed, r, p))
	}
	f.prompt.Tokens = toks
	for k, s := range f.servers {
		f.loads[k] = float64(s.pending)
	}
	d, err := f.router.Route(&f.prompt, f.names, f.loads)
	if err != nil {
		return err
	}
	k, _ := slices.BinarySearch(f.names, d.Server)
	s := f.servers[k]
	s.sc.pending = append(s.sc.pending, &f.seqs[i])
	s.pending++
	f.routedPrompt += int64(r.Input)
	f.routedHit += int64(d.Cached * f.fc.Scheme.BlockSize)
	return nil
}

func (f *fleet) measure(step int) {
	total, most := 0, 0
	for k, s := range f.servers {
		f.out[k] = s.pending
		total += s.pending
		most = max(most, s.pending)
	}
	if total > 0 {
		f.imbalanceSum += float64(most) * float64(len(f.servers)) / float64(total)
		f.busySteps++
	}
	if f.fc.OnStep != nil {
		f.fc.OnStep(step, f.out)
	}
}

func (f *fleet) result() *FleetResult {
	r := &FleetResult{Policy: f.fc.Policy, Servers: f.fc.Servers, EventDelay: f.fc.EventDelay, Requests: len(f.reqs), Steps: f.steps, Batches: f.batches}
	var prompt, hit int64
	for _, s := range f.servers {
		r.Completed += s.sc.completed
		r.Preemptions += s.sc.totalPreempt
		prompt += s.sc.promptTokens
		hit += s.sc.hitTokens
	}
	if prompt > 0 {
		r.HitRate = float64(hit) / float64(prompt)
	}
	if f.routedPrompt > 0 {
		r.RoutedHitRate = float64(f.routedHit) / float64(f.routedPrompt)
	}
	if f.busySteps > 0 {
		r.Imbalance = f.imbalanceSum / float64(f.busySteps)
	}
	r.ArrivalSteps = f.arrivalSteps
	if f.arrivalSteps > 0 {
		r.CompletedPerStep = float64(f.arrivalCompleted) / float64(f.arrivalSteps)
	}
	return r
}
