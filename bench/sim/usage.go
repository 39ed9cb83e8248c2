package sim

import "fmt"

// Usage splits the KV budget, in token slots, at one step. The five parts add up to the
// budget exactly (Check): Tokens + Reserved + Internal + External + Free = capacity.
type Usage struct {
	// Tokens is the slots holding a token state that a running request uses. A block
	// shared by several requests counts once.
	Tokens int64
	// Reserved is the slots reserved ahead of need that the request will fill before it
	// finishes (contiguous schemes: the rest of its true length).
	Reserved int64
	// Internal is the slots allocated to a request that hold nothing now: contiguous
	// schemes, the reservation beyond the request's true length, which it will never
	// fill; paged schemes, the unused tail of each request's last block.
	Internal int64
	// External is free memory too small to use. Contiguous schemes: the free holes
	// smaller than the reservation of the request at the head of the waiting queue (0
	// when nothing waits). Paged schemes: the budget left over by the whole blocks, plus
	// the pool's null block.
	External int64
	// Free is the rest: free memory that could be used. For paged schemes with prefix
	// sharing it includes the cached blocks no running request holds (Cached), which the
	// pool reclaims on demand.
	Free int64
	// Cached is the part of Free held by the prefix cache alone.
	Cached int64
}

// Total is the sum of the five parts.
func (u Usage) Total() int64 { return u.Tokens + u.Reserved + u.Internal + u.External + u.Free }

// Check reports an error unless every part is non-negative and they add up to capacity.
func (u Usage) Check(capacity int) error {
	if u.Tokens < 0 || u.Reserved < 0 || u.Internal < 0 || u.External < 0 || u.Free < 0 || u.Cached < 0 || u.Cached > u.Free {
		return fmt.Errorf("usage has a negative part: %+v", u)
	}
	if u.Total() != int64(capacity) {
		return fmt.Errorf("usage %+v adds up to %d, not the capacity %d", u, u.Total(), capacity)
	}
	return nil
}

// Shares is a Usage as fractions of the capacity, time-averaged.
type Shares struct {
	Tokens, Reserved, Internal, External, Free, Cached float64
}

// StepRecord is what the scheduler saw at one step, after admission and before the step's
// tokens were generated (the moment the forward pass uses the memory).
type StepRecord struct {
	// Step is the step number; an idle stretch (nothing running or waiting) is one record
	// at its first step with Weight steps.
	Step, Weight int
	// Running and Waiting count requests.
	Running, Waiting int
	// Usage splits the KV budget.
	Usage Usage
	// Saturated is true while the step lies in the measured phase.
	Saturated bool
}
