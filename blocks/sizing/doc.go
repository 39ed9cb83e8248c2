// Package sizing is kvpage's KV-cache sizing arithmetic. Its functions say how many blocks fit
// and for whom, exactly: a ModelSpec (layer groups of full or sliding-window attention, or MLA
// latents) gives the KV bits per token in any DType, block-scaled fp4 included; a KVLayout
// spreads it over tensor-parallel GPUs in blocks; NewPlan takes the weights and the runtime
// overhead out of the GPU's memory and gives the blocks, the concurrency at a context and the
// longest context that fits, with a plain explanation when it does not; PlanFleet counts the
// GPUs for a peak load. ParseHFConfig reads a Hugging Face config.json, ModelPreset and
// GPUPreset hold published models and devices, and ParseSize reads token counts as vLLM does.
// They are pure functions of their arguments, safe for concurrent use, and their errors wrap
// ErrBadSize, ErrUnknownModel, ErrUnknownGPU, ErrUnknownDType, ErrMissingField, ErrBadConfig or
// ErrInvalidArgument; a plan that does not fit is a result, whose Err wraps ErrDoesNotFit.
//
// # Where an extension goes
//
// A new model or GPU preset is a row in presets/models.json or presets/gpus.json; a new data
// type is a row in dtype.go's table; a new layer kind is a LayerGroup kind in model.go.
package sizing
