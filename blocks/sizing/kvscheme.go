package sizing

import (
	"encoding/json"
	"strings"
)

// The KV cache data type a quantized checkpoint declares in its quantization_config, which
// vLLM's --kv-cache-dtype auto takes instead of the model's data type. vLLM reads two forms:
//
//   - ModelOpt (quant_method "modelopt", or any starting with it; vllm/utils/torch_utils.py
//     get_kv_cache_quant_algo_string, called by resolve_kv_cache_dtype_string): the first
//     of kv_cache_scheme and kv_cache_quant_algo, in quantization_config.quantization if
//     that is there, else in quantization_config itself, that is set (Python's "or": null,
//     false, 0, "", {} and [] are not). An object {"type": "float", "num_bits": 8,
//     "dynamic": false} is fp8, {"type": "float", "num_bits": 4} nvfp4; a string is read
//     without case through MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP: "fp8" is fp8_e4m3,
//     "nvfp4" nvfp4, "mixed_precision" auto. Anything else falls back to auto, with a
//     warning.
//   - compressed-tensors (llm-compressor; vllm's Attention layer, which re-applies what
//     resolve_kv_cache_dtype_string does upstream): a kv_cache_scheme that is not null
//     makes auto "fp8", fp8_e4m3 on CUDA. CompressedTensorsKVCacheMethod refuses, and vLLM
//     does not start, a scheme with neither type "float" nor num_bits 8, a strategy other
//     than "tensor" or "attn_head", or symmetric not true: so is it refused here
//     (ErrBadConfig). Only the Attention layer applies the rule: a model of MLA layers
//     alone (DeepSeek's; vLLM's MLAAttention reads the cache data type as it stands) keeps
//     auto the model's data type, and ParseHFConfig records no KVDType for it, only a note.
//
// Other methods (fp8, mxfp4, awq, gptq, ...) declare no KV cache data type: auto stays the
// model's.

// maxKVAlgoName bounds the kv_cache_quant_algo string compared: longer is no name vLLM
// maps, so auto, as vLLM falls back for an unknown one.
const maxKVAlgoName = 64

// kvCacheDType reads the checkpoint's KV cache data type from quantization_config qc
// (named name, for errors): 0 when it declares none or one vLLM falls back to auto for.
// The note says where a non-zero one came from.
func kvCacheDType(qc map[string]any, name string) (DType, string, error) {
	method, _ := qc["quant_method"].(string)
	switch {
	case strings.HasPrefix(method, "modelopt"):
		return modeloptKVDType(qc, name)
	case method == "compressed-tensors":
		return compressedTensorsKVDType(qc, name)
	}
	return 0, "", nil
}

func modeloptKVDType(qc map[string]any, name string) (DType, string, error) {
	inner, prefix := qc, ""
	if v, ok := qc["quantization"]; ok {
		m, isObj := v.(map[string]any)
		if !isObj {
			// vLLM calls .get on it and fails to start.
			return 0, "", badField(name+".quantization", "is %s, want an object", jsonKind(v))
		}
		inner, prefix = m, "quantization."
	}
	var algo any
	where := ""
	for _, c := range []struct {
		m     map[string]any
		key   string
		where string
	}{
		{inner, "kv_cache_scheme", prefix + "kv_cache_scheme"},
		{qc, "kv_cache_scheme", "kv_cache_scheme"},
		{inner, "kv_cache_quant_algo", prefix + "kv_cache_quant_algo"},
		{qc, "kv_cache_quant_algo", "kv_cache_quant_algo"},
	} {
		if v := c.m[c.key]; truthy(v) {
			algo, where = v, c.where
			break
		}
	}
	s := ""
	switch a := algo.(type) {
	case nil:
		return 0, "", nil
	case map[string]any:
		switch {
		case a["dynamic"] == false && numberIs(a["num_bits"], 8) && a["type"] == "float":
			s = "fp8"
		case numberIs(a["num_bits"], 4) && a["type"] == "float":
			s = "nvfp4"
		default:
			return 0, "", nil // vLLM: unknown, falls back to auto
		}
	case string:
		if len(a) > maxKVAlgoName {
			return 0, "", nil
		}
		s = a
	default:
		return 0, "", nil // a number or a list: vLLM maps neither, auto
	}
	var d DType
	switch {
	case strings.EqualFold(s, "fp8"):
		d = FP8E4M3
	case strings.EqualFold(s, "nvfp4"):
		d = NVFP4
	default: // "mixed_precision", or unknown: auto
		return 0, "", nil
	}
	return d, name + "." + where + " (ModelOpt): the checkpoint's KV cache is " + d.String() + ", which --kv-cache-dtype auto takes", nil
}

func compressedTensorsKVDType(qc map[string]any, name string) (DType, string, error) {
	v, ok := qc["kv_cache_scheme"]
	if !ok || v == nil {
		return 0, "", nil
	}
	field := name + ".kv_cache_scheme"
	s, isObj := v.(map[string]any)
	if !isObj {
		return 0, "", badField(field, "is %s, want an object", jsonKind(v))
	}
	if s["type"] != "float" && !numberIs(s["num_bits"], 8) {
		return 0, "", badField(field, "is not an 8-bit float scheme; vLLM supports only num_bits 8, type float")
	}
	if st := s["strategy"]; st != "tensor" && st != "attn_head" {
		return 0, "", badField(field, "strategy is not tensor or attn_head, the scale layouts vLLM supports")
	}
	if !truthy(s["symmetric"]) {
		return 0, "", badField(field, "is not symmetric; vLLM supports only symmetric KV scales")
	}
	return FP8E4M3, field + " (compressed-tensors): the checkpoint's KV cache is fp8_e4m3, which --kv-cache-dtype auto takes", nil
}

// truthy is Python's truth of a decoded JSON value: null, false, 0, "", {} and [] are false.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0
	case map[string]any:
		return len(x) > 0
	case []any:
		return len(x) > 0
	}
	return true
}

// numberIs reports whether v is a JSON number equal to n, as Python's == compares 8 and
// 8.0 (true and "8" are not numbers here; Python's True == 1 matters for no n used).
func numberIs(v any, n float64) bool {
	x, ok := v.(json.Number)
	if !ok {
		return false
	}
	f, err := x.Float64()
	return err == nil && f == n
}
