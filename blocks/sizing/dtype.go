package sizing

import (
	"strings"
)

// DType is the element type of the KV cache (vLLM's --kv-cache-dtype) or of the weights.
//
// Sizes are exact: a DType says how many bits n values take, scales included, and the
// sizing adds bits, so a 4-bit type with per-block scales never rounds a byte count until
// the very end.
//
// Scale layout assumed for the block-scaled 4-bit types, per vector (one head's K or V, or
// one MLA latent), never spanning two heads:
//
//   - NVFP4: 4-bit e2m1 values, one 8-bit e4m3 scale per 16 values (4.5 bits a value), the
//     layout of NVIDIA's NVFP4; the per-tensor fp32 second-level scale is left out.
//   - MXFP4: 4-bit e2m1 values, one 8-bit e8m0 scale per 32 values (4.25 bits a value), the
//     OCP microscaling layout gpt-oss ships its expert weights in.
//
// fp8 and int8 caches use per-tensor (per-layer) scales in vLLM: a few bytes a layer, not
// per token, so they are not counted.
type DType uint8

// The data types the sizing knows. The zero DType is invalid.
const (
	FP32    DType = iota + 1 // 32-bit float
	FP16                     // IEEE half
	BF16                     // bfloat16
	FP8E4M3                  // fp8 e4m3 (vLLM's "fp8" on CUDA)
	FP8E5M2                  // fp8 e5m2
	INT8                     // 8-bit integer
	NVFP4                    // 4-bit e2m1 with an fp8 scale per 16 values
	MXFP4                    // 4-bit e2m1 with an e8m0 scale per 32 values
)

type dtypeInfo struct {
	name       string
	valueBits  int64
	scaleBits  int64 // bits of one scale, 0 when no per-block scale is stored
	scaleBlock int64 // values sharing one scale
}

var dtypeTable = [...]dtypeInfo{
	FP32:    {"fp32", 32, 0, 0},
	FP16:    {"fp16", 16, 0, 0},
	BF16:    {"bf16", 16, 0, 0},
	FP8E4M3: {"fp8_e4m3", 8, 0, 0},
	FP8E5M2: {"fp8_e5m2", 8, 0, 0},
	INT8:    {"int8", 8, 0, 0},
	NVFP4:   {"nvfp4", 4, 8, 16},
	MXFP4:   {"mxfp4", 4, 8, 32},
}

// dtypeNames maps every accepted spelling (vLLM's --kv-cache-dtype and --dtype choices,
// torch dtype names as config.json writes them, short forms) to its DType.
var dtypeNames = map[string]DType{
	"fp32": FP32, "float32": FP32, "float": FP32,
	"fp16": FP16, "float16": FP16, "half": FP16,
	"bf16": BF16, "bfloat16": BF16,
	"fp8": FP8E4M3, "fp8_e4m3": FP8E4M3, "fp8e4m3": FP8E4M3, "e4m3": FP8E4M3, "float8_e4m3fn": FP8E4M3,
	"fp8_e5m2": FP8E5M2, "fp8e5m2": FP8E5M2, "e5m2": FP8E5M2, "float8_e5m2": FP8E5M2,
	"int8": INT8,
	"fp4":  NVFP4, "nvfp4": NVFP4,
	"mxfp4": MXFP4,
}

// ParseDType reads a data type name: fp32, fp16, bf16, fp8 (= fp8_e4m3), fp8_e5m2, int8,
// fp4 (= nvfp4), mxfp4, and the torch spellings (float16, bfloat16, float8_e4m3fn, ...).
// Case is ignored. "auto" is not a DType: see ResolveCacheDType.
func ParseDType(s string) (DType, error) {
	d, ok := dtypeNames[strings.ToLower(strings.TrimSpace(s))]
	if !ok {
		return 0, &UnknownNameError{Kind: "data type", Name: s, Closest: closestNames(s, DTypeNames(), 3), Err: ErrUnknownDType}
	}
	return d, nil
}

// DTypeNames lists the canonical names, in the order of the constants.
func DTypeNames() []string {
	names := make([]string, 0, len(dtypeTable)-1)
	for d := FP32; d <= MXFP4; d++ {
		names = append(names, d.String())
	}
	return names
}

// Valid reports whether d is one of the constants.
func (d DType) Valid() bool { return d >= FP32 && d <= MXFP4 }

// String returns the canonical name ("fp16", "fp8_e4m3", "nvfp4", ...).
func (d DType) String() string {
	if !d.Valid() {
		return "invalid"
	}
	return dtypeTable[d].name
}

// VectorBits returns the bits that n values of this type take when stored as one vector:
// n values plus one scale per started block of values for the block-scaled types.
func (d DType) VectorBits(n int64) int64 {
	if !d.Valid() || n <= 0 {
		return 0
	}
	info := dtypeTable[d]
	bits := n * info.valueBits
	if info.scaleBlock > 0 {
		bits += (n + info.scaleBlock - 1) / info.scaleBlock * info.scaleBits
	}
	return bits
}

// BitsPerValue returns the average bits a value takes in a long vector, scales included:
// 16 for fp16, 4.5 for nvfp4.
func (d DType) BitsPerValue() float64 {
	if !d.Valid() {
		return 0
	}
	info := dtypeTable[d]
	b := float64(info.valueBits)
	if info.scaleBlock > 0 {
		b += float64(info.scaleBits) / float64(info.scaleBlock)
	}
	return b
}
