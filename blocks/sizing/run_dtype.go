package sizing

import (
	"slices"
	"strings"
)

// modelDTypeNames are vLLM's --dtype choices (vllm/config/model.py, ModelDType) and what
// each means (_STR_DTYPE_TO_TORCH_DTYPE); "auto" is 0, ServingDType's own rule.
var modelDTypeNames = []struct {
	name string
	d    DType
}{
	{"auto", 0}, {"half", FP16}, {"float16", FP16}, {"bfloat16", BF16}, {"float", FP32}, {"float32", FP32},
}

// ModelDTypeNames lists the values of vLLM's --dtype, in vLLM's order: auto, half, float16,
// bfloat16, float, float32.
func ModelDTypeNames() []string {
	names := make([]string, len(modelDTypeNames))
	for i, n := range modelDTypeNames {
		names[i] = n.name
	}
	return names
}

// ParseModelDType reads a value of vLLM's --dtype, the data type the model runs in:
// exactly one of auto, half, float16, bfloat16, float and float32, as vLLM's argument
// parser takes them. "auto" returns 0 (ServingDType's rule); half and float16 are FP16,
// bfloat16 BF16, float and float32 FP32. Anything else, "fp16" and "bf16" included, is
// refused with an *UnknownNameError wrapping ErrUnknownDType.
func ParseModelDType(s string) (DType, error) {
	for _, n := range modelDTypeNames {
		if s == n.name {
			return n.d, nil
		}
	}
	closest := closestNames(s, ModelDTypeNames(), 3)
	if d, err := ParseDType(s); err == nil {
		// A data type under another spelling ("fp16", "bf16", "FLOAT32"): name vLLM's.
		closest = closest[:0]
		for _, n := range modelDTypeNames {
			if n.d == d {
				closest = append(closest, n.name)
			}
		}
	}
	if len(closest) == 0 {
		closest = ModelDTypeNames() // fp8, int8: no model runs in them
	}
	return 0, &UnknownNameError{Kind: "--dtype value", Name: s, Closest: closest, Err: ErrUnknownDType}
}

// noFP16ModelTypes are the model types vLLM refuses to run in float16
// (_FLOAT16_NOT_SUPPORTED_MODELS: numerical instability), which --dtype auto never picks.
var noFP16ModelTypes = []string{"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"}

func fp16Refused(modelType string) bool { return slices.Contains(noFP16ModelTypes, modelType) }

// WithRunDType returns m run in d, the data type given with vLLM's --dtype (0 for auto):
// the weights (unless the checkpoint stores them in WeightDType), the Mamba /
// linear-attention state and the KV cache under --kv-cache-dtype auto are then sized in
// d, whatever the config's torch_dtype (vLLM up- and downcasts between fp32, fp16 and
// bf16). d must be 0, FP16, BF16 or FP32; FP16 is refused, as vLLM's _check_valid_dtype
// refuses it, for the model types gemma2, gemma3, gemma3_text, plamo2 and glm4. Errors
// wrap ErrInvalidArgument; m itself is never changed.
func (m ModelSpec) WithRunDType(d DType) (ModelSpec, error) {
	switch {
	case d != 0 && d != FP16 && d != BF16 && d != FP32:
		return m, invalidf("--dtype %s: vLLM runs a model in float16, bfloat16 or float32 only", d)
	case d == FP16 && fp16Refused(m.ModelType):
		return m, invalidf("model type %s does not run in float16 (vLLM refuses it: numerical instability); use bfloat16 or float32", m.ModelType)
	}
	m.RunDType = d
	if d != 0 {
		// The parser's notes on how --dtype auto reads torch_dtype no longer apply.
		m.Notes = slices.DeleteFunc(slices.Clone(m.Notes), isAutoDTypeNote)
		if len(m.Notes) == 0 {
			m.Notes = nil
		}
	}
	return m, nil
}

// isAutoDTypeNote reports whether n is one of the parser's notes on how --dtype auto reads
// torch_dtype (hfConfig.dtypes).
func isAutoDTypeNote(n string) bool {
	return strings.HasPrefix(n, "no torch_dtype: ") || strings.HasPrefix(n, "torch_dtype ")
}
