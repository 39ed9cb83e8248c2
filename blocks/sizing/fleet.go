package sizing

import (
	"math/bits"
)

// FleetConfig describes a fleet to size: Concurrent conversations in flight at the peak,
// AvgContext tokens each on average, served by replicas of Plan's deployment.
type FleetConfig struct {
	// Plan is one replica. Plan.MaxModelLen 0 means AvgContext here (only the average
	// request must fit); Plan.TensorParallel 0 means: try each size of TensorParallelSizes
	// and keep the smallest that fits, unless a larger one needs TPSaving fewer GPUs.
	Plan       PlanConfig
	Concurrent int64
	AvgContext int64
	// TensorParallelSizes are the sizes tried when Plan.TensorParallel is 0; nil means
	// 1, 2, 4, 8, 16, 32, 64. Sizes the model's heads forbid are skipped.
	TensorParallelSizes []int
}

// Fleet is a sized fleet.
type Fleet struct {
	// Replica is one replica's plan, at the chosen tensor parallel size.
	Replica    Plan
	Concurrent int64
	AvgContext int64
	// ChosenTP is true when the tensor parallel size was chosen by PlanFleet.
	ChosenTP bool
	// FewestGPUs and FewestGPUsTP are, when ChosenTP, the fewest GPUs any size tried
	// needs and that size (the chosen one when no size needs fewer).
	FewestGPUs   int64
	FewestGPUsTP int
	// BytesPerRequest is one average request's KV cache on one GPU of a replica.
	BytesPerRequest int64
	// CacheBytes is the KV cache the whole fleet holds at the peak: Concurrent x
	// BytesPerRequest x the GPUs of a replica (replicated heads counted on every GPU).
	CacheBytes int64
	// PerReplica is how many average requests one replica holds at once.
	PerReplica int64
	Replicas   int64
	GPUs       int64
}

// Fits reports whether a replica holds at least one average request.
func (f Fleet) Fits() bool { return f.Replica.Fits() && f.PerReplica > 0 }

// Err returns nil when the fleet fits, and the replica's *NoFitError otherwise.
func (f Fleet) Err() error {
	if f.Fits() {
		return nil
	}
	if err := f.Replica.Err(); err != nil {
		return err
	}
	return &NoFitError{Plan: f.Replica}
}

var defaultTPSizes = []int{1, 2, 4, 8, 16, 32, 64}

// TPSaving is the share of GPUs a larger tensor-parallel size must save, against the
// smaller size chosen so far, for PlanFleet to choose it. Tensor parallelism costs
// throughput per GPU (every layer all-reduces across the group), so a model that fits one
// GPU runs on one unless splitting it saves a fifth of the fleet: Llama 3 8B on H100s
// stays at 1 (TP 4 would save 15% at 8,000 tokens), Llama 3.1 70B goes to 8 (30% fewer
// GPUs than at 4).
const TPSaving = 0.2

// PlanFleet sizes the fleet c describes: requests per replica from the KV cache left on
// each GPU after the weights, replicas to hold c.Concurrent of them, GPUs in all. The
// average is what matters because paged KV cache holds each request's actual tokens, not
// its maximum. A fleet that does not fit is returned with Fits false and GPUs 0; errors
// are for bad input only.
func PlanFleet(c FleetConfig) (Fleet, error) {
	if c.Concurrent <= 0 {
		return Fleet{}, invalidf("concurrent conversations %d must be positive", c.Concurrent)
	}
	if c.AvgContext <= 0 || c.AvgContext > MaxTokens {
		return Fleet{}, invalidf("average context %d must be between 1 and %d tokens", c.AvgContext, MaxTokens)
	}
	if c.Plan.MaxModelLen == 0 {
		c.Plan.MaxModelLen = int(c.AvgContext)
	}
	if c.Plan.TensorParallel != 0 {
		return fleetAt(c, c.Plan)
	}
	sizes := c.TensorParallelSizes
	if sizes == nil {
		sizes = defaultTPSizes
	}
	var best Fleet
	var firstErr error
	found := false
	fewest, fewestTP := int64(0), 0
	for _, tp := range sizes {
		pc := c.Plan
		pc.TensorParallel = tp
		f, err := fleetAt(c, pc)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue // a size the heads forbid
		}
		f.ChosenTP = true
		if f.Fits() && (fewest == 0 || f.GPUs < fewest) {
			fewest, fewestTP = f.GPUs, tp
		}
		if !found || better(f, best) {
			best, found = f, true
		}
	}
	if !found {
		return Fleet{}, firstErr
	}
	best.FewestGPUs, best.FewestGPUsTP = fewest, fewestTP
	return best, nil
}

// better prefers a fleet that fits, then (sizes being tried in increasing order) a larger
// size only when it saves TPSaving of the GPUs.
func better(a, b Fleet) bool {
	if a.Fits() != b.Fits() {
		return a.Fits()
	}
	if !a.Fits() {
		return false // keep the smallest size's explanation
	}
	return float64(a.GPUs) <= (1-TPSaving)*float64(b.GPUs)
}

func fleetAt(c FleetConfig, pc PlanConfig) (Fleet, error) {
	p, err := NewPlan(pc)
	if err != nil {
		return Fleet{}, err
	}
	f := Fleet{Replica: p, Concurrent: c.Concurrent, AvgContext: c.AvgContext}
	f.BytesPerRequest = p.Layout.BytesPerRequest(c.AvgContext)
	tp := uint64(p.Config.TensorParallel)
	hi, lo := bits.Mul64(uint64(c.Concurrent), uint64(f.BytesPerRequest))
	hi2, total := bits.Mul64(lo, tp)
	if hi != 0 || hi2 != 0 || total > 1<<62 {
		return Fleet{}, invalidf("%d conversations of %d tokens need more than 4 EiB of KV cache", c.Concurrent, c.AvgContext)
	}
	f.CacheBytes = int64(total)
	if p.Fits() {
		f.PerReplica = p.Layout.MaxConcurrency(p.KVBudget, c.AvgContext)
		if n := p.Config.MaxNumSeqs; n > 0 && f.PerReplica > int64(n) {
			f.PerReplica = int64(n)
		}
	}
	if f.PerReplica > 0 {
		f.Replicas = (c.Concurrent + f.PerReplica - 1) / f.PerReplica
		f.GPUs = f.Replicas * int64(tp)
	}
	return f, nil
}
