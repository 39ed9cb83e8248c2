package vllmhash

// AppendCBORTokens is appendCBORTokens, for the test that compares it with appendCBORInt.
func AppendCBORTokens(dst []byte, toks []int32) []byte { return appendCBORTokens(dst, toks) }

// AppendCBORInt is appendCBORInt.
func AppendCBORInt(dst []byte, v int64) []byte { return appendCBORInt(dst, v) }
