package sim

import (
	"fmt"
	"math"
)

// Defaults of the scheduler, as in vLLM where vLLM has the same knob.
const (
	// DefaultMaxModelLen is the paper's setup (and Orca-Max's reservation).
	DefaultMaxModelLen = 2048
	// DefaultMaxNumSeqs caps the running requests. It is set high enough that memory, not
	// this cap, bounds the batch of every scheme in the default comparison, since memory is
	// what the simulator compares. vLLM's own default on an 80 GB-class GPU is 1024; with it
	// the paged schemes hit the cap on the default workload and leave memory free.
	DefaultMaxNumSeqs = 4096
	// DefaultMaxNumBatchedTokens is vLLM's default --max-num-batched-tokens for the
	// OpenAI server on an 80 GB-class GPU.
	DefaultMaxNumBatchedTokens = 8192
	// DefaultStepDuration is the seconds one scheduler step stands for when a trace's
	// arrival times are mapped to steps: a typical decode step of an 8B model.
	DefaultStepDuration = 0.025
)

// maxTensorParallel bounds Config.TensorParallel, as the kvpage command bounds
// --tensor-parallel-size.
const maxTensorParallel = 1024

// gpus is Config.TensorParallel, 0 read as 1.
func (c *Config) gpus() int { return max(c.TensorParallel, 1) }

// Config is the simulated server: its KV memory and its scheduler's caps.
type Config struct {
	// Capacity is the KV budget in tokens: what the KV cache can hold when every slot
	// holds a token state. Every scheme gets the same budget.
	Capacity int
	// MaxModelLen bounds prompt + output of every request (vLLM's --max-model-len); it is
	// also Orca-Max's reservation. Prepare applies it to a trace.
	MaxModelLen int
	// MaxNumSeqs caps the running requests (vLLM's --max-num-seqs).
	MaxNumSeqs int
	// MaxNumBatchedTokens caps the tokens computed in one step, decode tokens and
	// prefills together (vLLM's --max-num-batched-tokens). Without chunked prefill it must
	// be at least MaxModelLen, as vLLM requires.
	MaxNumBatchedTokens int
	// StepDuration is the seconds one step stands for: a request arriving at t seconds
	// joins the waiting queue at step floor(t / StepDuration).
	StepDuration float64
	// Seed fixes the synthetic token ids (see Token).
	Seed uint64
	// TensorParallel is the GPUs the model is split over (vLLM's --tensor-parallel-size;
	// 0 is 1). The simulator runs one of them: Capacity is that GPU's budget. The hybrid
	// scheme, which sizes its pages from its model, takes each GPU's shard of them
	// (sizing.ModelSpec.HybridOnGPU), and its shares of the host and the disk, which the
	// GPUs share, at TensorParallel shards a block (TierBlocks). The paged scheme's tiers
	// come in blocks: its caller sizes them with TierBlocks.
	TensorParallel int
	// OnStep, when set, receives every step's record (idle stretches as one record with a
	// Weight). It runs on the goroutine that simulates the scheme: Compare calls it from
	// several goroutines at once.
	OnStep func(StepRecord)
	// Progress, when set, is called with the number of requests completed since its last
	// call, every 1,024 completions and at the end. Compare calls it from several
	// goroutines at once.
	Progress func(done int)
}

// DefaultConfig returns the defaults for a KV budget of capacity tokens.
func DefaultConfig(capacity int) Config {
	return Config{
		Capacity:            capacity,
		MaxModelLen:         DefaultMaxModelLen,
		MaxNumSeqs:          DefaultMaxNumSeqs,
		MaxNumBatchedTokens: DefaultMaxNumBatchedTokens,
		StepDuration:        DefaultStepDuration,
		Seed:                42,
	}
}

// Validate reports the first setting the simulator cannot run.
func (c *Config) Validate() error {
	switch {
	case c.MaxModelLen < 2:
		return fmt.Errorf("%w: max-model-len %d: a request needs at least one prompt and one output token", ErrInvalidConfig, c.MaxModelLen)
	case c.Capacity < c.MaxModelLen:
		return fmt.Errorf("%w: the KV budget of %d tokens cannot hold one request of max-model-len %d; lower --max-model-len or give more memory", ErrInvalidConfig, c.Capacity, c.MaxModelLen)
	case c.MaxNumSeqs < 1:
		return fmt.Errorf("%w: max-num-seqs %d must be at least 1", ErrInvalidConfig, c.MaxNumSeqs)
	case c.MaxNumBatchedTokens < c.MaxModelLen:
		return fmt.Errorf("%w: max-num-batched-tokens %d is below max-model-len %d: without chunked prefill a long prompt could never be scheduled", ErrInvalidConfig, c.MaxNumBatchedTokens, c.MaxModelLen)
	case c.MaxNumBatchedTokens < c.MaxNumSeqs:
		return fmt.Errorf("%w: max-num-batched-tokens %d is below max-num-seqs %d: the running requests' decode tokens would not fit one step", ErrInvalidConfig, c.MaxNumBatchedTokens, c.MaxNumSeqs)
	case c.TensorParallel < 0 || c.TensorParallel > maxTensorParallel:
		return fmt.Errorf("%w: tensor parallel size %d outside [0, %d]", ErrInvalidConfig, c.TensorParallel, maxTensorParallel)
	case !(c.StepDuration > 0) || math.IsInf(c.StepDuration, 0):
		return fmt.Errorf("%w: step duration %v must be a positive number of seconds", ErrInvalidConfig, c.StepDuration)
	}
	return nil
}

// Prepared is a trace fitted to a max-model-len, with what the fitting changed.
type Prepared struct {
	// Requests that can run, in arrival order, renumbered from 0.
	Requests []Request
	// Rejected counts requests whose prompt leaves no room for one output token within
	// max-model-len (vLLM refuses them).
	Rejected int
	// Capped counts requests whose output was cut so that prompt + output fit
	// max-model-len (vLLM stops them there).
	Capped int
}

// Prepare applies maxModelLen to a trace as vLLM would: a request whose prompt has no room
// for one output token is rejected, and an output that would run past maxModelLen is
// capped. Shared prefixes are cut to the new length. A request that waits for a rejected
// one (After) no longer waits. The trace is not modified.
func Prepare(t *Trace, maxModelLen int) *Prepared {
	p := &Prepared{Requests: make([]Request, 0, len(t.Requests))}
	newID := make([]int, len(t.Requests)) // trace index -> prepared ID, -1 if rejected
	for i, r := range t.Requests {
		newID[i] = -1
		if r.Input+1 > maxModelLen {
			p.Rejected++
			continue
		}
		if r.Input+r.Output > maxModelLen {
			r.Output = maxModelLen - r.Input
			p.Capped++
		}
		r.Shared = min(r.Shared, r.Input+r.Output)
		r.BaseShared = min(r.BaseShared, r.Shared)
		r.ID = len(p.Requests)
		newID[i] = r.ID
		if r.After > 0 {
			r.After = 0
			if j := i - t.Requests[i].After; j >= 0 && newID[j] >= 0 {
				r.After = r.ID - newID[j]
			}
		}
		p.Requests = append(p.Requests, r)
	}
	return p
}
