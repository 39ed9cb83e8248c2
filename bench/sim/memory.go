package sim

import (
	"fmt"

	"github.com/kvpage/kvpage/blocks/sizing"
)

// TokenBudget converts a sized deployment (sizing.NewPlan: a model on a GPU) into the
// simulator's KV budget in tokens: the KV bytes per GPU divided by the bytes one token
// takes on that GPU, all layers counted (sliding windows, which let a layer hold fewer
// tokens, are not modelled by the simulator). It fails when the plan does not fit.
func TokenBudget(p sizing.Plan) (int, error) {
	if err := p.Err(); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	bits := int64(p.BytesPerTokenPerGPU)
	if bits <= 0 {
		return 0, fmt.Errorf("%w: the model takes %d bits per token", ErrInvalidConfig, bits)
	}
	tokens := p.KVBudget / bits * 8
	tokens += (p.KVBudget % bits) * 8 / bits
	if tokens > 1<<31-1 {
		return 0, fmt.Errorf("%w: a KV budget of %d tokens is beyond the simulator (2^31 - 1)", ErrInvalidConfig, tokens)
	}
	return int(tokens), nil
}
