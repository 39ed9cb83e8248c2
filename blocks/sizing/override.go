package sizing

import "fmt"

// BytesPerTokenModel returns a model whose KV cache takes exactly bytesPerToken bytes per
// token in the whole model, for sizing from a figure alone (a textbook's "0.05 MB per
// token") rather than from a model's layers. Its cache type must be INT8, one byte a
// value; its KV heads are the largest power of two up to 64 that divides bytesPerToken,
// so that tensor parallelism up to that size splits the bytes exactly, as it splits a
// real model's heads. It has no weights: give PlanConfig.WeightBytes.
func BytesPerTokenModel(bytesPerToken int64) (ModelSpec, error) {
	// Validate bounds a model's values per token as if each took 32 bits.
	if bytesPerToken < 2 || bytesPerToken > maxBitsPerToken/32 {
		return ModelSpec{}, invalidf("%d bytes of KV cache per token: want 2 to %d", bytesPerToken, maxBitsPerToken/32)
	}
	heads := int64(64)
	for bytesPerToken%heads != 0 || bytesPerToken/heads < 2 {
		heads /= 2
	}
	values := bytesPerToken / heads // K + V values per head, over all layers
	layers := int64(1)
	for values/layers > 2*maxDim || values%layers != 0 {
		layers++
	}
	perLayer := values / layers
	return ModelSpec{
		Name:        fmt.Sprintf("%s B per token", groupDigits(bytesPerToken)),
		Groups:      []LayerGroup{{Layers: int(layers), KVHeads: int(heads), KHeadDim: int((perLayer + 1) / 2), VHeadDim: int(perLayer / 2)}},
		DType:       INT8,
		WeightBytes: 0,
		Source:      "--kv-bytes-per-token: a uniform layout of that many bytes per token",
	}, nil
}
